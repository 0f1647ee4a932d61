#include "delta_rule_kernels_cuda.h"

#include <algorithm>

#include "block_exec_cuda.cuh"
#include "delta_rule_driver.h"

namespace rlloop::cuda {
namespace {

struct CudaRun {
  bool tf32;
  template <class Program>
  void operator()(const Program& program, int64_t blocks, int64_t shared_floats) const {
    block::run_on_cuda(program, blocks, shared_floats, tf32);
  }
};

}  // namespace

int64_t delta_rule_shared_bytes(int64_t D) {
  using namespace delta_rule;
  const int d = static_cast<int>(D), bv = scan_columns(D);
  const int64_t floats = std::max({Prep::shared_floats(d), ScanForward::shared_floats(d, bv), Output::shared_floats(d),
                                   ScanBackward::shared_floats(d, bv), StateGrads::shared_floats(d),
                                   IntraGrads::shared_floats(d)});
  return floats * static_cast<int64_t>(sizeof(float));
}

at::Tensor delta_rule_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                              const at::Tensor& g, at::Tensor* states, bool tf32) {
  return delta_rule::forward(CudaRun{tf32}, q, k, v, beta, g, states);
}

std::array<at::Tensor, 5> delta_rule_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& beta, const at::Tensor& g, const at::Tensor& states,
                                              const at::Tensor& dO, bool tf32) {
  return delta_rule::backward(CudaRun{tf32}, q, k, v, beta, g, states, dO);
}

}  // namespace rlloop::cuda
