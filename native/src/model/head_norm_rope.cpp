#include "model/head_norm_rope.h"

#include <torch/csrc/autograd/custom_function.h>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#include "model/rms_norm.h"
#ifdef RLLOOP_CUDA
#include "kernels/head_norm_rope.h"
#endif

namespace rlloop {
namespace {

#ifdef RLLOOP_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The norm weight and the rotary tables are constants: the gradient flows to x only.
struct HeadNormRope : public torch::autograd::Function<HeadNormRope> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1, double eps,
                            const at::Tensor& cos, const at::Tensor& sin) {
    auto [y, r] = cuda::head_norm_rope_forward(x, w1, eps, cos, sin);
    ctx->save_for_backward({x, w1, r, cos, sin});  // x as given: a view of the projection's output
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("attention.head_norm_rope");
    variable_list s = ctx->get_saved_variables();
    return {cuda::head_norm_rope_backward(grads[0], s[0], s[1], s[2], s[3], s[4]), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

at::Tensor normed_rotated_heads(const at::Tensor& x, const at::Tensor& weight, double eps, const RotaryTables& rotary) {
#ifdef RLLOOP_CUDA
  if (x.is_cuda() && cuda_kernel_enabled("rope") && !weight.requires_grad() &&
      cuda::head_norm_rope_accepts(x, rotary.cos, rotary.sin)) {
    const at::Tensor w1 = weight.to(at::kFloat) + 1.0;  // (1 + w) in float32, as zero_centred_rms_norm
    return HeadNormRope::apply(x, w1, eps, rotary.cos, rotary.sin);
  }
#endif
  // the rotation works on [B, heads, L, D]
  return apply_partial_rotary(zero_centred_rms_norm(x, weight, eps).transpose(1, 2), rotary).transpose(1, 2);
}

}  // namespace rlloop
