// CUDA kernels of the MLP's SwiGLU, silu(gate) ⊙ up, forward and backward, one pass each. ATen runs it as two
// passes forward (silu, then the product) and three backward, and autograd keeps silu(gate) as a third saved
// tensor of the MLP's widest size; these keep only gate and up. Same arithmetic and the same roundings to the
// model dtype as ATen's silu, mul and silu_backward. Built only with RLLOOP_CUDA; swiglu.cpp wraps them in an
// autograd function and falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace rlloop::cuda {

// Whether gate and up suit the kernels: CUDA, both float32 or both bfloat16, the same shape, contiguous, aligned to
// eight elements, a multiple of eight elements.
bool swiglu_kernels_accept(const at::Tensor& gate, const at::Tensor& up);

// cast(cast(silu(gate_f)) · up_f): the rounding of silu(gate) first, as silu then mul in the model dtype.
at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up);

// {grad_gate, grad_up} = {silu_backward(cast(d · up), gate), cast(d · cast(silu(gate)))}.
std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad_out, const at::Tensor& gate,
                                                   const at::Tensor& up);

}  // namespace rlloop::cuda
