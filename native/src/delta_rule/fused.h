// The chunked gated delta rule as fused kernels (delta_rule/programs.h): the same function and autograd contract
// as delta_rule_chunks (whose ATen formulation stays the reference and the fallback), in three kernels forward and
// four backward instead of ~150 ATen operations a layer. On CUDA tensors unless RLLOOP_KERNELS turns
// "delta_rule" off; on CPU tensors only with RLLOOP_DELTA_RULE_CPU=kernels, which runs the same block programs
// sequentially (for the tests: the CUDA build's arithmetic, checked without a GPU).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// Whether the kernels can take float32 inputs shaped like q [B, H, N, 64, dk] and v [B, H, N, 64, dv]: dk = dv, a
// head size the build has kernels for (CUDA: 128, the model's, within the device's shared memory; CPU: 16, 32,
// 64, 128).
bool delta_rule_kernels_support(const at::Tensor& q, const at::Tensor& v);

// Whether the model uses them: supported, and their switch on (CUDA: RLLOOP_KERNELS; CPU: RLLOOP_DELTA_RULE_CPU).
bool delta_rule_kernels_apply(const at::Tensor& q, const at::Tensor& v);

// Inputs and output as delta_rule_chunks (float32; q L2-normalised and scaled, k L2-normalised, padded to whole
// chunks). Differentiable; saves its inputs, the chunks' starting states, the solve's U and W and its inverse T
// for the backward.
at::Tensor delta_rule_kernels(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                              const at::Tensor& g);

}  // namespace rlloop
