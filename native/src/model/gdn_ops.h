// Gated DeltaNet's differentiable building blocks with a CUDA fast path (kernels/gdn.h, when built with
// RLLOOP_CUDA and the tensors are on a GPU) and the plain ATen formulation everywhere else (the CPU conformance
// suite runs that one against transformers). Both compute the same function; bench/gpu/kernel_check.mjs compares
// them on the GPU.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// silu(depthwise causal conv1d(x)): x [B, L, C], weight [C, 1, K] (frozen: no gradient); returns [B, L, C].
at::Tensor causal_conv_silu(const at::Tensor& x, const at::Tensor& weight);

// (I + strictly_lower(A))^-1 R for a batch of square systems: A [..., n, n], R [..., n, m] (A's diagonal and upper
// triangle are ignored), float32; differentiable in A and R.
at::Tensor unit_lower_solve(const at::Tensor& A, const at::Tensor& R);

// The same solve outside autograd, or with transpose (I + strictly_lower(A))^-T R (for hand-written backwards).
at::Tensor unit_lower_solve_raw(const at::Tensor& A, const at::Tensor& R, bool transpose);

}  // namespace rlloop
