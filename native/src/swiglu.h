// The MLP's gated activation, silu(gate) ⊙ up (qwen35.md §3.3), with a CUDA fast path (swiglu_kernels.h, when
// built with RLLOOP_CUDA and the tensors suit it) and ATen's silu and product everywhere else — the formulation the
// CPU conformance suite checks against transformers. Both compute the same function with the same roundings;
// bench/gpu/kernel_check.mjs compares them on the GPU.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// silu(gate) * up, differentiable in both.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

}  // namespace rlloop
