#include "model/rms_norm.h"

#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/rms_norm.h"
#endif

namespace rlloop {
namespace {

at::Tensor zero_centred_rms_norm_aten(const at::Tensor& x, const at::Tensor& w1, double eps, const at::Tensor& row_scale) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  at::Tensor y = (normed * w1).to(x.scalar_type());
  return row_scale.defined() ? y * row_scale.unsqueeze(-1) : y;
}

// o [B, H, Lp, dv] float32 → [B, L, H, dv] in dtype, contiguous, as one strided, converting copy (a contiguous
// float32 copy then a conversion passed over the output twice). In float32 `to` returns the transposed view itself
// (its suggested memory format is "contiguous"), so the copy is asked for by contiguous().
at::Tensor converted_core(const at::Tensor& o, int64_t L, at::ScalarType dtype) {
  return o.narrow(2, 0, L).transpose(1, 2).to(dtype, /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::Contiguous)
      .contiguous();
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
// The row scale (the GDN's padding mask) is a constant: no gradient. It comes as an optional, as the checkpointed
// layer's mask does: an undefined tensor cannot be an autograd input (Function::apply reads every tensor
// argument's device).
struct ZeroCentredRmsNorm : public torch::autograd::Function<ZeroCentredRmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w1, double eps,
                            const std::optional<at::Tensor>& row_scale_arg) {
    const at::Tensor row_scale = row_scale_arg.value_or(at::Tensor());
    auto [y, r] = cuda::zero_centred_rms_norm_forward(x, w1, eps, row_scale);
    ctx->save_for_backward({x, w1, r, row_scale});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("norm");
    variable_list s = ctx->get_saved_variables();
    return {cuda::zero_centred_rms_norm_backward(grads[0], s[0], s[1], s[2], s[3]), at::Tensor(), at::Tensor(),
            at::Tensor()};
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

// The GDN's output norm fed by the delta rule's float32 heads-major output o [B, H, Lp, dv]: the conversion to x
// (the model dtype, [B, L, H, dv]) happens here, and the backward writes o's gradient in o's layout directly (the
// conversion's and the narrow's backward were two more passes over a float32 [B, H, Lp, dv]). o itself is not kept.
struct GatedRmsNormHeadsMajor : public torch::autograd::Function<GatedRmsNormHeadsMajor> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& o, int64_t L, const at::Tensor& gate,
                            const at::Tensor& w, double eps, at::ScalarType dtype) {
    const at::Tensor x = converted_core(o, L, dtype);
    auto [out, r] = cuda::gated_rms_norm_forward(x, gate, w, eps);
    ctx->save_for_backward({x, gate, w, r});
    ctx->saved_data["padded"] = o.size(2);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.gated_norm");
    variable_list s = ctx->get_saved_variables();
    auto [d_o, dgate] =
        cuda::gated_rms_norm_backward_heads_major(grads[0], s[0], s[1], s[2], s[3], ctx->saved_data["padded"].toInt());
    return {d_o, at::Tensor(), dgate, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Checked before any copy: contiguous() below is only paid when the kernel will run.
bool kernels_apply(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cuda() && cuda_kernel_enabled("norm") && !weight.requires_grad() && x.size(-1) % 8 == 0 &&
         (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat);
}
#endif

}  // namespace

at::Tensor zero_centred_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, const at::Tensor& row_scale) {
  const at::Tensor w1 = weight.to(at::kFloat) + 1.0;  // (1 + w) in float32, as transformers computes it
#ifdef RLLOOP_CUDA
  if (kernels_apply(x, weight) && (!row_scale.defined() || row_scale.scalar_type() == x.scalar_type())) {
    const at::Tensor xc = x.contiguous();
    const std::optional<at::Tensor> sc = row_scale.defined() ? std::optional(row_scale.contiguous()) : std::nullopt;
    if (cuda::norm_kernels_accept(xc)) return ZeroCentredRmsNorm::apply(xc, w1, eps, sc);
  }
#endif
  return zero_centred_rms_norm_aten(x, w1, eps, row_scale);
}

at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps) {
#ifdef RLLOOP_CUDA
  if (kernels_apply(x, weight) && gate.sizes() == x.sizes() && gate.scalar_type() == x.scalar_type() &&
      weight.scalar_type() == x.scalar_type()) {
    // the gate is read in place where its rows allow (the GDN's z, a view of its input projection's output)
    const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
    const at::Tensor gc = cuda::gate_rows_of(gate) ? gate : gate.contiguous();
    if (cuda::norm_kernels_accept(xc) && cuda::gate_rows_of(gc) && cuda::norm_kernels_accept(wc)) {
      return GatedRmsNorm::apply(xc, gc, wc, eps);
    }
  }
#endif
  return gated_rms_norm_aten(x, gate, weight, eps);
}

at::Tensor gated_rms_norm_of_heads_major(const at::Tensor& o, int64_t L, const at::Tensor& gate, const at::Tensor& weight,
                                        double eps, at::ScalarType dtype) {
#ifdef RLLOOP_CUDA
  if (kernels_apply(o, weight) && o.dim() == 4 && o.scalar_type() == at::kFloat && gate.scalar_type() == dtype &&
      weight.scalar_type() == dtype && (dtype == at::kBFloat16 || dtype == at::kFloat) && o.is_contiguous() &&
      gate.dim() == 4 && gate.size(0) == o.size(0) && gate.size(1) == L && gate.size(2) == o.size(1) &&
      gate.size(3) == o.size(3)) {
    const at::Tensor wc = weight.contiguous();
    const at::Tensor gc = cuda::gate_rows_of(gate) ? gate : gate.contiguous();
    if (cuda::gate_rows_of(gc) && cuda::norm_kernels_accept(wc)) return GatedRmsNormHeadsMajor::apply(o, L, gc, wc, eps, dtype);
  }
#endif
  return gated_rms_norm(converted_core(o, L, dtype), gate, weight, eps);
}

}  // namespace rlloop
