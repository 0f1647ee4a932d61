// The two RMSNorm flavours of the Qwen3.5 text model (qwen35.md §3.1). Swapping them is the classic bug:
// the zero-centred one scales by (1 + w) with w initialised to zeros; the gated one scales by plain w (ones).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// input_layernorm, post_attention_layernorm, final norm, q_norm/k_norm: everything in float32, (1 + w) applied in
// float32 before the single cast back to x's dtype (unlike Llama). row_scale, when defined, multiplies each row of
// the result in x's dtype: x's shape less its last dimension, the GDN's padding mask (transformers applies it to
// the linear-attention layers' normed input; one pass instead of two on the GPU).
at::Tensor zero_centred_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps,
                                 const at::Tensor& row_scale = {});

// GDN output norm, per value head, norm before gate: n = cast(x_f32 * rsqrt(mean(x²) + eps)); y = w * n (x's dtype);
// y = y * silu(gate_f32) (float32); cast back to x's dtype.
at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps);

// gated_rms_norm(cast(o[:, :, :L].transpose(1, 2)), gate, weight, eps): the GDN's core output o [B, H, Lp, dv]
// float32 heads-major (Lp ≥ L, the delta rule's chunk padding) rounded to dtype, as transformers rounds it, then the
// gated norm. On a GPU the backward hands o its gradient in o's layout (no conversion or narrow pass).
at::Tensor gated_rms_norm_of_heads_major(const at::Tensor& o, int64_t L, const at::Tensor& gate, const at::Tensor& weight,
                                        double eps, at::ScalarType dtype);

}  // namespace rlloop
