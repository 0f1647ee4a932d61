// CUDA kernels of the text model's full-attention q and k preparation (qwen35.md §3.1, §6.1): the per-head
// zero-centred RMSNorm and the partial split-half rotary embedding in one pass, forward and input gradient. The
// composition they replace (model/head_norm_rope.h) ran as a contiguous copy of the strided heads, the norm, and
// six ATen passes of the rotation (a negation, two concatenations, two products, a sum): ~9 ms of a 32-row forward
// at the 9B shapes with the repeated k and v heads (bench/RESULTS.md). These read the heads where the fused q/k/v
// projection wrote them and write the rotated heads once; the same float32 operations with the same roundings to the
// model dtype (no fused multiply-add), so the result agrees with the composition to the bit. Built only with
// RLLOOP_CUDA.
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace rlloop::cuda {

// Whether the kernels take x [..., tokens, heads, D] (heads at one stride within a token, tokens at one stride, the
// leading dimensions collapsing into the tokens; channels contiguous; strides and start aligned to 8 elements) with
// w1 [D] float32, and cos, sin [tokens, rot] contiguous in x's dtype: float32 or bfloat16, D a multiple of 8, rot a
// multiple of 16 and at most min(D, 256).
bool head_norm_rope_accepts(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// y = rope(cast(x_f · r · w1)) with r = rsqrt(mean(x_f²) + eps) per head vector, rope rotating its first rot
// channels (y_i = cast(cast(n_i·cos_i) + cast(rh_i·sin_i)), rh = (−n[half:rot], n[:half])). Returns {y, r}: y
// [..., tokens, heads, D] contiguous in x's dtype, r float32 [tokens · heads].
std::tuple<at::Tensor, at::Tensor> head_norm_rope_forward(const at::Tensor& x, const at::Tensor& w1, double eps,
                                                          const at::Tensor& cos, const at::Tensor& sin);

// The gradient with respect to x (contiguous, x's shape), through the rotation's transpose then the norm's.
at::Tensor head_norm_rope_backward(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& w1,
                                   const at::Tensor& r, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace rlloop::cuda
