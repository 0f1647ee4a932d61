// A full-attention layer's q and k heads made ready for the attention: the per-head zero-centred RMSNorm (q_norm,
// k_norm; qwen35.md §3.1) then the partial split-half rotary embedding (§6.1), as transformers orders them. One
// CUDA kernel pass each way on a GPU (kernels/head_norm_rope.h, switch `rope`), the ATen composition elsewhere.
#pragma once
#include <ATen/ATen.h>

#include "model/rope.h"

namespace rlloop {

// x [B, L, heads, D], a view of the fused q/k/v projection's output is read in place on a GPU; weight [D] frozen.
// Returns [B, L, heads, D] in x's dtype.
at::Tensor normed_rotated_heads(const at::Tensor& x, const at::Tensor& weight, double eps, const RotaryTables& rotary);

}  // namespace rlloop
