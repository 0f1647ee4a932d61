// CUDA kernel of the vision tower's 2-D rotary embedding (qwen35.md §6.2): q and k of one attention block rotated
// in one pass. transformers (and the ATen formulation in vision/rope.cpp) runs it as ~10 float32 passes over
// [patches, heads, head_dim] per tensor (a cast, rotate_half's negation and concatenation, two products, a sum, a
// cast back): ~40% of the tower's time at 32 frames of 640x480 (bench/RESULTS.md). Same float32 operations in the
// same order, each rounded as ATen rounds it (no fused multiply-add), so the result agrees to the bit. Built only
// with RLLOOP_CUDA; vision/rope.cpp falls back to ATen elsewhere.
#pragma once
#include <ATen/ATen.h>

#include <utility>

namespace rlloop::cuda {

// Whether the operands suit the kernel: CUDA, qkv [N, 3, H, d] contiguous float32 or bfloat16 with d even, cos and
// sin [N, d] contiguous float32.
bool vision_rope_kernel_accepts(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin);

// {q, k} [N, H, d] in qkv's dtype: cast(x·cos + rotate_half(x)·sin) of qkv[:, 0] and qkv[:, 1], in float32.
std::pair<at::Tensor, at::Tensor> vision_rope(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace rlloop::cuda
