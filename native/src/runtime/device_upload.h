// Host-to-device copies of a batch prepared off the model's worker thread (prepare() has a thread of its own, so a
// batch is collated and uploaded while the previous one computes). On CUDA each host tensor is staged in pinned
// memory and copied on a side stream: the copy overlaps the worker's kernels instead of queueing behind them on the
// compute stream (where a pageable copy would also block this thread until the running forward ended). The
// batch's first use calls ready() on the worker thread: the compute stream waits for the copies' event (no host
// sync) and the copies are recorded as used on that stream, so the caching allocator does not give their memory
// back to the side stream while the compute stream may still read it. One side stream per model (side_stream()):
// the caching allocator reuses a freed block only for its own stream, so a stream per batch would strand freed
// uploads. Event calls run under a guard of the target device (CUDA's event calls restore the previous device with
// a plain cudaSetDevice, which on a thread that never chose one would open a context on GPU 0 in every rank).
// Everything runs on the compute threads' current (default) stream, so one ready() orders every later use.
// On the CPU the copies are plain moves.
#pragma once
#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <optional>
#include <vector>

namespace rlloop {

class DeviceUpload {
 public:
  // The side stream for uploads to `device` (one per model; none for the CPU).
  static std::optional<c10::Stream> side_stream(at::Device device);

  DeviceUpload(at::Device device, std::optional<c10::Stream> stream);
  ~DeviceUpload();
  DeviceUpload(const DeviceUpload&) = delete;
  DeviceUpload& operator=(const DeviceUpload&) = delete;

  // An empty host tensor to fill and then copy(): pinned when the target is a CUDA device.
  at::Tensor host_buffer(at::IntArrayRef sizes, at::ScalarType dtype) const;
  // The tensor's copy on the device, queued on the side stream (staged in pinned memory first if it is pageable).
  at::Tensor copy(const at::Tensor& host);
  // Marks the end of the copies (records their event); call once, after the last copy().
  void finish();
  // On the thread about to use the copies: orders its current stream after them, then lets go of them (the batch
  // holds what it still needs). Idempotent.
  void ready();

 private:
  at::Device device_;
  std::optional<c10::Stream> stream_;  // absent for a CPU target
  std::optional<c10::Event> done_;
  std::vector<at::Tensor> copies_;  // until ready()
  bool waited_ = false;
};

}  // namespace rlloop
