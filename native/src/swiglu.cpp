#include "swiglu.h"

#include <torch/csrc/autograd/custom_function.h>

#include "backward_timeline.h"
#include "cuda_kernels_switch.h"
#ifdef RLLOOP_CUDA
#include "swiglu_kernels.h"
#endif

namespace rlloop {
namespace {

#ifdef RLLOOP_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saves gate and up only (autograd's silu-then-mul also keeps silu(gate)).
struct Swiglu : public torch::autograd::Function<Swiglu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return cuda::swiglu_forward(gate, up);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("mlp.swiglu");
    variable_list saved = ctx->get_saved_variables();
    auto [grad_gate, grad_up] = cuda::swiglu_backward(grads[0], saved[0], saved[1]);
    return {grad_gate, grad_up};
  }
};
#endif

}  // namespace

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
#ifdef RLLOOP_CUDA
  if (gate.is_cuda() && cuda_kernel_enabled("swiglu") && cuda::swiglu_kernels_accept(gate, up)) {
    return Swiglu::apply(gate, up);
  }
#endif
  return at::silu(gate) * up;
}

}  // namespace rlloop
