#include "model/swiglu.h"

#include <torch/csrc/autograd/custom_function.h>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/swiglu.h"
#endif

namespace rlloop {
namespace {

#ifdef RLLOOP_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saves gate_up only (autograd's silu-then-mul also keeps silu(gate)); its gradient comes back as one tensor, so the
// grouped GEMM's backward reads it without autograd gathering two halves.
struct SwigluPacked : public torch::autograd::Function<SwigluPacked> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate_up) {
    ctx->save_for_backward({gate_up});
    return cuda::swiglu_forward(gate_up);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("mlp.swiglu");
    variable_list saved = ctx->get_saved_variables();
    return {cuda::swiglu_backward(grads[0], saved[0])};
  }
};
#endif

}  // namespace

at::Tensor swiglu_packed(const at::Tensor& gate_up) {
#ifdef RLLOOP_CUDA
  if (gate_up.is_cuda() && cuda_kernel_enabled("swiglu") && cuda::swiglu_kernels_accept(gate_up)) {
    return SwigluPacked::apply(gate_up);
  }
#endif
  const std::vector<at::Tensor> halves = gate_up.chunk(2, -1);
  return at::silu(halves[0]) * halves[1];
}

}  // namespace rlloop
