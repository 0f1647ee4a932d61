#include "lora/matmul.h"

#include <torch/csrc/autograd/custom_function.h>

namespace rlloop {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Saves what autograd's two mm's and addmm_ saved: x2, the rank-r product x aᵀ, the factors, and W (frozen).
struct LoraMatmul : public torch::autograd::Function<LoraMatmul> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& a,
                            const at::Tensor& b) {
    at::Tensor xa = at::mm(x2, a.t());
    // The adapter's term is the base GEMM's accumulator input (beta = 1): the sum happens in its float32 epilogue.
    at::Tensor y = at::mm(xa, b.t()).addmm_(x2, weight.t());
    ctx->save_for_backward({x2, weight, a, b, xa});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x2 = saved[0], &weight = saved[1], &a = saved[2], &b = saved[3], &xa = saved[4];
    const at::Tensor& dy = grads[0];
    const at::Tensor d_xa = at::mm(dy, b);  // [rows, r]
    at::Tensor grad_x, grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_x = at::mm(d_xa, a).addmm_(dy, weight);  // one pass: base onto the adapter's
    if (ctx->needs_input_grad(2)) grad_a = at::mm(d_xa.t(), x2);
    if (ctx->needs_input_grad(3)) grad_b = at::mm(dy.t(), xa);
    return {grad_x, at::Tensor(), grad_a, grad_b};
  }
};

}  // namespace

at::Tensor lora_matmul(const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b) {
  return LoraMatmul::apply(x2, weight, a, b);
}

}  // namespace rlloop
