// CUDA kernels of the MLP's SwiGLU, silu(gate) ⊙ up, forward and backward, one pass each, on gate and up side by
// side in one tensor ([..., 2I] = [gate | up], as the MLP's grouped GEMM writes them). ATen runs it as two passes
// forward (silu, then the product) and three backward, and autograd keeps silu(gate) as a third saved tensor of
// the MLP's widest size; these keep only gate_up. Same arithmetic and the same roundings to the model dtype as
// ATen's silu, mul and silu_backward. Built only with RLLOOP_CUDA; model/swiglu.cpp wraps them in an autograd function
// and falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

namespace rlloop::cuda {

// Whether gate_up suits the kernels: CUDA, float32 or bfloat16, contiguous, aligned to eight elements, its last
// dimension 2I with I a multiple of eight.
bool swiglu_kernels_accept(const at::Tensor& gate_up);

// [..., I] = cast(cast(silu(gate_f)) · up_f): the rounding of silu(gate) first, as silu then mul in the model dtype.
at::Tensor swiglu_forward(const at::Tensor& gate_up);

// [..., 2I] = [silu_backward(cast(d · up), gate) | cast(d · cast(silu(gate)))].
at::Tensor swiglu_backward(const at::Tensor& grad_out, const at::Tensor& gate_up);

}  // namespace rlloop::cuda
