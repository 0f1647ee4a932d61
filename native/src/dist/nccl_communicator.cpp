// NCCL collectives for CUDA ranks, through libtorch's c10d ProcessGroupNCCL (libtorch_cuda, with the nccl.h of
// the nvidia-nccl wheel that torch's CUDA wheel depends on). It brings what a hand-rolled binding lacked: the
// communicator set up through the group's store, collectives on NCCL's own stream ordered with the model's
// current stream, and timeouts. A collective that has not completed within the group's timeout (a peer that died,
// wedged or never issued it) ends with an error naming this rank and the operation (ProcessGroup::guarded), and
// libtorch's watchdog aborts the communicator, so a broken rank fails the round instead of hanging it.
#include "dist/process_group.h"

#include "base/check.h"

#ifdef RLLOOP_CUDA
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace rlloop {
namespace {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, int device_index,
                   std::chrono::milliseconds timeout)
      : Communicator(rank, world_size),
        device_(at::kCUDA, static_cast<c10::DeviceIndex>(device_index)),
        timeout_(timeout) {
    c10::DeviceGuard guard(device_);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    // its keys apart from the store collectives' (StoreCommunicator's "rlloop/..." keys)
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("rlloop/nccl", store);
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank, world_size, options);
  }

  ~NcclCommunicator() override {
    if (group_) group_->shutdown();
  }

  void all_reduce(at::Tensor& t, ReduceOp op) override {
    RLLOOP_CHECK(t.device() == device_ && t.scalar_type() == at::kFloat && t.is_contiguous(), Internal,
                 "NCCL allReduce needs a contiguous float32 tensor on " << device_.str());
    c10::DeviceGuard guard(device_);
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions options;
    options.reduceOp = op == ReduceOp::Mean ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
    options.timeout = timeout_;
    finish(group_->allreduce(tensors, options));
  }

  void barrier() override {
    c10::DeviceGuard guard(device_);
    c10d::BarrierOptions options;
    options.device_ids = {static_cast<int64_t>(device_.index())};
    options.timeout = timeout_;
    finish(group_->barrier(options));
  }

 private:
  at::Device device_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;

  // Blocks until the collective has completed on the GPU or the timeout has passed (then c10d throws; the caller
  // names the operation). Waiting on the host keeps the error on this rank's worker thread, where the job fails.
  void finish(const c10::intrusive_ptr<c10d::Work>& work) const {
    RLLOOP_CHECK(work->wait(timeout_), Io, "collective did not complete within " << timeout_.count() << " ms");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int world_size, int device_index, std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCommunicator>(store, rank, world_size, device_index, timeout);
}

}  // namespace rlloop

#else

namespace rlloop {

std::unique_ptr<Communicator> make_nccl_communicator(const c10::intrusive_ptr<c10d::Store>&, int, int, int,
                                                     std::chrono::milliseconds) {
  RLLOOP_FAIL(Unsupported, "process group: backend nccl needs the CUDA build of the native module (npm run build:native on the GPU machine)");
}

}  // namespace rlloop

#endif
