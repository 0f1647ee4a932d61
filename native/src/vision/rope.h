// The vision tower's 2-D rotary embedding applied to one block's q and k (qwen35.md §6.2, §11: in float32, then
// cast back): the CUDA kernel of kernels/vision_rope.h where it applies (RLLOOP_KERNELS name "vision_rope"), the
// ATen formulation elsewhere.
#pragma once
#include <ATen/ATen.h>

#include <utility>

namespace rlloop {

// qkv [N, 3, H, d] (the block's fused projection), cos and sin [N, d] float32 → {q, k} [N, H, d] in qkv's dtype.
std::pair<at::Tensor, at::Tensor> vision_rope(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace rlloop
