#include "runtime/device_upload.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "base/check.h"

namespace rlloop {

std::optional<c10::Stream> DeviceUpload::side_stream(at::Device device) {
  if (device.is_cpu()) return std::nullopt;
  return c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device);
}

DeviceUpload::DeviceUpload(at::Device device, std::optional<c10::Stream> stream) : device_(device), stream_(stream) {
  RLLOOP_CHECK(device_.is_cpu() != stream_.has_value(), Internal, "DeviceUpload: a side stream for a CUDA target only");
}

DeviceUpload::~DeviceUpload() {
  if (!done_) return;
  const c10::DeviceGuard on_target(device_);
  done_.reset();
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
  const c10::DeviceGuard on_target(device_);
  done_.emplace(device_.type());
  done_->record(*stream_);
}

void DeviceUpload::ready() {
  if (!stream_ || waited_) return;
  RLLOOP_CHECK(done_, Internal, "DeviceUpload::ready before finish()");
  const c10::DeviceGuard on_target(device_);
  const c10::impl::VirtualGuardImpl guard(device_.type());
  const c10::Stream compute = guard.getStream(device_);
  done_->block(compute);
  for (const at::Tensor& t : copies_) guard.recordDataPtrOnStream(t.storage().data_ptr(), compute);
  copies_.clear();
  waited_ = true;
}

}  // namespace rlloop
