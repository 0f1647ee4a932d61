// CUDA kernels of the two RMSNorm flavours (model/rms_norm.h), forward and input gradient, one warp per row. ATen runs
// each norm as ~8 float32 elementwise passes forward and ~15 backward and autograd keeps float32 copies of the
// input; these read the input once (twice in backward) and keep only the input and one float per row. Same
// arithmetic and the same roundings to the model dtype as the ATen formulations. Built only with RLLOOP_CUDA;
// model/rms_norm.cpp wraps them in autograd functions and falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace rlloop::cuda {

// Whether x's rows suit the kernels: CUDA, float32 or bfloat16, contiguous, aligned to eight elements, last dim a
// multiple of 8.
bool norm_kernels_accept(const at::Tensor& x);

// Where the gated norm reads row `row` of its gate: (row / heads)·token_stride + (row % heads)·H elements from its
// start. A contiguous gate is {1, H}; the GDN's z, a slice of its input projection's [B, L, N] output viewed as
// [B, L, heads, H], is {heads, N}: read in place (its contiguous copy took 3.5 ms a 32-row forward at the 9B
// shapes).
struct GateRows {
  int64_t heads;
  int64_t token_stride;
};

// The gate's rows as the gated kernels read them; nullopt where they cannot (the caller passes a contiguous copy).
std::optional<GateRows> gate_rows_of(const at::Tensor& gate);

// y = cast(cast(x_f · r · w1) · s) with r = rsqrt(mean(x_f²) + eps) per row; w1 = 1 + w in float32 [H]; s the
// row's value of row_scale ([rows] in x's dtype: the GDN's padding mask, applied after the norm as transformers
// does) or 1 when it is undefined. Returns {y, r}, r float32 [rows].
std::tuple<at::Tensor, at::Tensor> zero_centred_rms_norm_forward(const at::Tensor& x, const at::Tensor& w1, double eps,
                                                                 const at::Tensor& row_scale = {});
at::Tensor zero_centred_rms_norm_backward(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& w1,
                                          const at::Tensor& r, const at::Tensor& row_scale = {});

// out = cast(cast(w · cast(x_f · r)) · silu(gate_f)), w [H] in x's dtype, gate shaped like x with rows as
// gate_rows_of reads them. Returns {out, r}; the backward returns {grad_x, grad_gate}, both contiguous.
std::tuple<at::Tensor, at::Tensor> gated_rms_norm_forward(const at::Tensor& x, const at::Tensor& gate,
                                                          const at::Tensor& w, double eps);
std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                           const at::Tensor& gate, const at::Tensor& w,
                                                           const at::Tensor& r);

// The same backward for x = cast(o[:, :, :L].transpose(1, 2)) made from the delta rule's float32 output o [B, heads,
// padded_tokens, H]: grad_x is written as o's gradient, float32 in o's layout (its padded tokens zero), i.e. through
// the conversion's and the narrow's backward (exact) in the same pass. x [B, L, heads, H] contiguous.
std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward_heads_major(const at::Tensor& grad_out, const at::Tensor& x,
                                                                       const at::Tensor& gate, const at::Tensor& w,
                                                                       const at::Tensor& r, int64_t padded_tokens);

}  // namespace rlloop::cuda
