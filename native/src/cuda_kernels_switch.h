// Whether one of the project's own CUDA kernels takes CUDA tensors: built with RLLOOP_CUDA and not turned off by
// RLLOOP_KERNELS — "0" turns every one off (the ATen formulations the CPU conformance suite checks then run on the
// GPU too), a comma-separated list of "-name" entries turns those off (e.g. "-qkv_heads,-norm", to bisect a
// numerical difference on the GPU); anything else is an Invalid error at the first kernel call. Names: conv and
// solve (gdn_kernels.cu), norm (norm_kernels.cu), qkv_heads (qkv_heads_kernels.cu), swiglu (swiglu_kernels.cu), delta_rule (the fused
// chunked delta rule, delta_rule_kernels.cu; off, the ATen formulation of delta_rule_chunks.cpp runs), vision_rope
// (vision_rope_kernels.cu).
// bench/gpu/kernel_check.sh compares the kernels with the ATen formulations on the GPU.
#pragma once

#include <string_view>

namespace rlloop {

bool cuda_kernel_enabled(std::string_view name);

}  // namespace rlloop
