#include "model/rms_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/rms_norm.h"
#endif

namespace rlloop {
namespace {

at::Tensor zero_centred_rms_norm_aten(const at::Tensor& x, const at::Tensor& w1, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * w1).to(x.scalar_type());
}

at::Tensor gated_rms_norm_aten(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps) {
  const auto dtype = x.scalar_type();
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = (xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(dtype);
  at::Tensor y = weight * normed;
  return (y * at::silu(gate.to(at::kFloat))).to(dtype);
}

#ifdef RLLOOP_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The norm weights are frozen: gradients flow to x (and the gate) only.
struct ZeroCentredRmsNorm : public torch::autograd::Function<ZeroCentredRmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1, double eps) {
    auto [y, r] = cuda::zero_centred_rms_norm_forward(x, w1, eps);
    ctx->save_for_backward({x, w1, r});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("norm");
    variable_list s = ctx->get_saved_variables();
    return {cuda::zero_centred_rms_norm_backward(grads[0], s[0], s[1], s[2]), at::Tensor(), at::Tensor()};
  }
};

struct GatedRmsNorm : public torch::autograd::Function<GatedRmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gate, const at::Tensor& w,
                            double eps) {
    auto [out, r] = cuda::gated_rms_norm_forward(x, gate, w, eps);
    ctx->save_for_backward({x, gate, w, r});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.gated_norm");
    variable_list s = ctx->get_saved_variables();
    auto [dx, dgate] = cuda::gated_rms_norm_backward(grads[0], s[0], s[1], s[2], s[3]);
    return {dx, dgate, at::Tensor(), at::Tensor()};
  }
};

// Checked before any copy: contiguous() below is only paid when the kernel will run.
bool kernels_apply(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cuda() && cuda_kernel_enabled("norm") && !weight.requires_grad() && x.size(-1) % 8 == 0 &&
         (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat);
}
#endif

}  // namespace

at::Tensor zero_centred_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor w1 = weight.to(at::kFloat) + 1.0;  // (1 + w) in float32, as transformers computes it
#ifdef RLLOOP_CUDA
  if (kernels_apply(x, weight)) {
    const at::Tensor xc = x.contiguous();
    if (cuda::norm_kernels_accept(xc)) return ZeroCentredRmsNorm::apply(xc, w1, eps);
  }
#endif
  return zero_centred_rms_norm_aten(x, w1, eps);
}

at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps) {
#ifdef RLLOOP_CUDA
  if (kernels_apply(x, weight) && gate.sizes() == x.sizes() && gate.scalar_type() == x.scalar_type() &&
      weight.scalar_type() == x.scalar_type()) {
    const at::Tensor xc = x.contiguous(), gc = gate.contiguous(), wc = weight.contiguous();
    if (cuda::norm_kernels_accept(xc) && cuda::norm_kernels_accept(gc) && cuda::norm_kernels_accept(wc)) {
      return GatedRmsNorm::apply(xc, gc, wc, eps);
    }
  }
#endif
  return gated_rms_norm_aten(x, gate, weight, eps);
}

}  // namespace rlloop
