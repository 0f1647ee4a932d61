// The MLP's gated activation, silu(gate) ⊙ up (qwen35.md §3.3), on gate and up side by side in one tensor (the
// MLP's grouped gate/up GEMM writes them so, lora/group.h), with a CUDA fast path (kernels/swiglu.h, when built with
// RLLOOP_CUDA and the tensor suits it) and ATen's silu and product everywhere else — the formulation the CPU
// conformance suite checks against transformers. Both compute the same function with the same roundings;
// bench/gpu/kernel_check.mjs compares them on the GPU.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// gate_up [..., 2I] = [gate | up] -> silu(gate) * up [..., I], differentiable; the gradient is one [..., 2I] tensor.
at::Tensor swiglu_packed(const at::Tensor& gate_up);

}  // namespace rlloop
