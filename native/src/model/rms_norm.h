// The two RMSNorm flavours of the Qwen3.5 text model (qwen35.md §3.1). Swapping them is the classic bug:
// the zero-centred one scales by (1 + w) with w initialised to zeros; the gated one scales by plain w (ones).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// input_layernorm, post_attention_layernorm, final norm, q_norm/k_norm: everything in float32, (1 + w) applied in
// float32 before the single cast back to x's dtype (unlike Llama).
at::Tensor zero_centred_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// GDN output norm, per value head, norm before gate: n = cast(x_f32 * rsqrt(mean(x²) + eps)); y = w * n (x's dtype);
// y = y * silu(gate_f32) (float32); cast back to x's dtype.
at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps);

}  // namespace rlloop
