#include "delta_rule/fused_cuda.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "block/exec_cuda.cuh"
#include "delta_rule/sequences.h"

namespace rlloop::cuda {
namespace {

// The model's head size only (Qwen3.5's linear attention: 128): each size is six kernels twice (TF32 and float32).
constexpr int kHeadSize = 128;

struct CudaRun {
  bool tf32;
  template <class Program>
  void operator()(const Program& program, int64_t blocks) const {
    block::run_on_cuda(program, blocks, tf32);
  }
};

constexpr int64_t kSharedBytes = sizeof(float) * std::max({delta_rule::Prep<kHeadSize>::kSharedFloats,
    delta_rule::ChunkTerms<kHeadSize>::kSharedFloats,
    delta_rule::ScanForward<kHeadSize, delta_rule::kScanColumns<kHeadSize>>::kSharedFloats,
    delta_rule::Output<kHeadSize>::kSharedFloats,
    delta_rule::ScanBackward<kHeadSize, delta_rule::kScanColumns<kHeadSize>>::kSharedFloats,
    delta_rule::StateGrads<kHeadSize>::kSharedFloats, delta_rule::IntraGrads<kHeadSize>::kSharedFloats});
// Hopper's (and the target machines') most a block may ask for: a program past it would send every model on an
// H100/H200 to the ATen version (delta_rule_supports), about 2x slower, with nothing but the speed to tell.
static_assert(kSharedBytes <= 227 * 1024, "a delta-rule program outgrew an H100/H200 block's shared memory (227 KiB)");

}  // namespace

bool delta_rule_supports(int64_t D, int device) {
  return D == kHeadSize && kSharedBytes <= static_cast<int64_t>(at::cuda::getDeviceProperties(device)->sharedMemPerBlockOptin);
}

at::Tensor delta_rule_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                              const at::Tensor& g, delta_rule::ForwardSaved* saved, bool tf32) {
  const c10::cuda::CUDAGuard guard(q.device());
  return delta_rule::forward<kHeadSize>(CudaRun{tf32}, q, k, v, beta, g, saved);
}

std::array<at::Tensor, 5> delta_rule_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& beta, const at::Tensor& g,
                                              const delta_rule::ForwardSaved& saved, const at::Tensor& dO, bool tf32) {
  const c10::cuda::CUDAGuard guard(q.device());
  return delta_rule::backward<kHeadSize>(CudaRun{tf32}, q, k, v, beta, g, saved, dO);
}

}  // namespace rlloop::cuda
