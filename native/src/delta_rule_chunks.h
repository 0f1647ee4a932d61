// The chunked gated delta rule's core as one autograd function with a hand-derived backward (opt-in:
// RLLOOP_GDN_BACKWARD=manual; the default lets autograd replay the ATen ops of gated_deltanet.cpp). It saves only
// its inputs and the chunk-start states and recomputes the chunk intermediates in backward, so a layer keeps far
// fewer activations; whether it is also faster on a GPU is for bench/gpu/kernel_check.sh to say (not measured yet).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// Inputs prepared as in chunk_gated_delta_rule: q (L2-normalised, scaled), k (L2-normalised) [B, H, N, C, dk], v
// [B, H, N, C, dv], beta and g [B, H, N, C], float32, padded to whole chunks. Returns o [B, H, N, C, dv].
at::Tensor delta_rule_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                             const at::Tensor& g);

// Whether RLLOOP_GDN_BACKWARD=manual asks for delta_rule_chunks (read once per process).
bool manual_delta_rule_backward();

}  // namespace rlloop
