// CUDA kernels of Gated DeltaNet's two hot spots that ATen runs slowly (profile in bench/RESULTS.md): the depthwise
// causal conv1d + SiLU, and the 64x64 unit-lower-triangular solves of the chunked delta rule (cuBLAS's batched
// trsm spent 2.9 ms a layer on 3,584 small systems). Built only with RLLOOP_CUDA (kernels/gdn.cu); model/gdn_ops.h
// wraps them in autograd functions and falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

namespace rlloop::cuda {

// The conv kernels' largest kernel size (taps live in registers); model/gdn_ops.h falls back to ATen above it.
inline constexpr int kCausalConvMaxTaps = 8;

// Whether the conv kernels read x as it is: a CUDA [B, L, C] with contiguous channels (C a multiple of 8), its
// batch and token strides and its start aligned to eight elements — a channel slice of a wider [B, L, N] output
// qualifies — and every offset under 2^31.
bool causal_conv_accepts(const at::Tensor& x);

// out[b, t, c] = silu(round(Σ_j w[c, j] · x[b, t - K + 1 + j, c])) with x[t < 0] = 0; x [B, L, C] as
// causal_conv_accepts takes it, out contiguous, w [C, K] in x's dtype (float32 or bfloat16), accumulation in
// float32, rounded to x's dtype before the SiLU as conv1d-then-silu is.
at::Tensor causal_conv_silu_forward(const at::Tensor& x, const at::Tensor& w);

// Gradient of the above with respect to x (the conv weight is frozen), contiguous.
at::Tensor causal_conv_silu_backward(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& w);

// X = (I + strictly_lower(A))^-1 R, or with transpose (I + strictly_lower(A))^-T R, for every matrix of a batch:
// A [..., 64, 64] and R [..., 64, n] float32 contiguous (A's diagonal and upper part are ignored).
at::Tensor unit_lower_solve(const at::Tensor& A, const at::Tensor& R, bool transpose);

}  // namespace rlloop::cuda
