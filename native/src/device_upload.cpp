#include "device_upload.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "check.h"

namespace rlloop {

DeviceUpload::DeviceUpload(at::Device device) : device_(device) {
  if (device_.is_cpu()) return;
  stream_ = c10::impl::VirtualGuardImpl(device_.type()).getStreamFromGlobalPool(device_);
}

at::Tensor DeviceUpload::host_buffer(at::IntArrayRef sizes, at::ScalarType dtype) const {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).pinned_memory(stream_.has_value()));
}

at::Tensor DeviceUpload::copy(const at::Tensor& host) {
  RLLOOP_CHECK(!done_, Internal, "DeviceUpload::copy after finish()");
  if (!stream_) return host.to(device_);
  c10::StreamGuard on_side_stream(*stream_);
  const at::Tensor staged = host.is_pinned() ? host : host.pin_memory();
  at::Tensor out = staged.to(device_, /*non_blocking=*/true);  // the host allocator keeps `staged` until it lands
  copies_.push_back(out);
  return out;
}

void DeviceUpload::finish() {
  if (!stream_ || done_) return;
  done_.emplace(device_.type());
  done_->record(*stream_);
}

void DeviceUpload::ready() {
  if (!stream_ || waited_) return;
  RLLOOP_CHECK(done_, Internal, "DeviceUpload::ready before finish()");
  const c10::impl::VirtualGuardImpl guard(device_.type());
  const c10::Stream compute = guard.getStream(device_);
  done_->block(compute);
  for (const at::Tensor& t : copies_) guard.recordDataPtrOnStream(t.storage().data_ptr(), compute);
  waited_ = true;
}

}  // namespace rlloop
