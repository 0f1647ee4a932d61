// CUDA kernels of the two RMSNorm flavours (model/rms_norm.h), forward and input gradient, one warp per row. ATen runs
// each norm as ~8 float32 elementwise passes forward and ~15 backward and autograd keeps float32 copies of the
// input; these read the input once (twice in backward) and keep only the input and one float per row. Same
// arithmetic and the same roundings to the model dtype as the ATen formulations. Built only with RLLOOP_CUDA;
// model/rms_norm.cpp wraps them in autograd functions and falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace rlloop::cuda {

// Whether x's rows suit the kernels: CUDA, float32 or bfloat16, contiguous, aligned to eight elements, last dim a
// multiple of 8.
bool norm_kernels_accept(const at::Tensor& x);

// y = cast(x_f · r · w1) with r = rsqrt(mean(x_f²) + eps) per row; w1 = 1 + w in float32 [H]. Returns {y, r}, r
// float32 [rows].
std::tuple<at::Tensor, at::Tensor> zero_centred_rms_norm_forward(const at::Tensor& x, const at::Tensor& w1, double eps);
at::Tensor zero_centred_rms_norm_backward(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& w1,
                                          const at::Tensor& r);

// out = cast(cast(w · cast(x_f · r)) · silu(gate_f)), w [H] in x's dtype, gate like x. Returns {out, r}; the
// backward returns {grad_x, grad_gate}.
std::tuple<at::Tensor, at::Tensor> gated_rms_norm_forward(const at::Tensor& x, const at::Tensor& gate,
                                                          const at::Tensor& w, double eps);
std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                           const at::Tensor& gate, const at::Tensor& w,
                                                           const at::Tensor& r);

}  // namespace rlloop::cuda
