// CUDA kernels for model/qkv_heads.h: the conv output's q, k, v rows to float32 heads-major tensors in one pass (and the
// gradient back in one pass), instead of ATen's dozen transposing copies and elementwise float32 passes (the
// profile in bench/RESULTS.md: layout copies and broadcasting multiplies were a third of the GDN core's time).
// Built only with RLLOOP_CUDA; model/qkv_heads.cpp wraps them in an autograd function.
#pragma once
#include <ATen/ATen.h>

#include <array>

namespace rlloop::cuda {

// Whether mixed suits the kernels: CUDA, float32 or bfloat16, contiguous [B, L, 2·Hk·d + H·d] aligned to eight
// elements, d a multiple of 8, H a multiple of Hk.
bool qkv_heads_kernels_accept(const at::Tensor& mixed, int64_t key_heads, int64_t value_heads, int64_t head_dim);

// mixed [B, L, 2·Hk·d + H·d] (q heads, k heads, v heads) → {q, k, v} float32 [B, H, Lp, d]: q and k
// L2-normalised per key head (eps inside the rsqrt), q times q_scale, key head j repeated to value heads
// j·H/Hk … (j+1)·H/Hk − 1; rows L … Lp − 1 zero.
std::array<at::Tensor, 3> qkv_heads_forward(const at::Tensor& mixed, int64_t key_heads, int64_t value_heads,
                                            int64_t head_dim, int64_t padded_len, double q_scale, double eps);

// The gradient with respect to mixed (its dtype) of the above, from the three outputs' gradients (an undefined
// one counts as zeros).
at::Tensor qkv_heads_backward(const at::Tensor& grad_q, const at::Tensor& grad_k, const at::Tensor& grad_v,
                              const at::Tensor& mixed, int64_t key_heads, int64_t value_heads, int64_t head_dim,
                              double q_scale, double eps);

}  // namespace rlloop::cuda
