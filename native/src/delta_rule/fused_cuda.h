// The CUDA build of the delta rule's kernel sequences (delta_rule/fused_cuda.cu); delta_rule/fused.cpp is the caller.
#pragma once
#include <ATen/ATen.h>

#include <array>

#include "delta_rule/forward_saved.h"

namespace rlloop::cuda {

// Whether this build has kernels for head size D that fit the shared memory of CUDA device `device`.
bool delta_rule_supports(int64_t D, int device);

// As delta_rule::forward / backward (delta_rule/sequences.h) on q's device, products in TF32 or in float32.
at::Tensor delta_rule_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                              const at::Tensor& g, delta_rule::ForwardSaved* saved, bool tf32);
std::array<at::Tensor, 5> delta_rule_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& beta, const at::Tensor& g,
                                              const delta_rule::ForwardSaved& saved, const at::Tensor& dO, bool tf32);

}  // namespace rlloop::cuda
