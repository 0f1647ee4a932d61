// The chunked gated delta rule's core: the chunk terms (intra-chunk decay, the UT transform's triangular solve)
// and the scan over chunks. By default autograd records and replays each ATen op; with RLLOOP_GDN_BACKWARD=manual
// it is one autograd node with a hand-derived backward that saves only its inputs and the chunk-start states and
// recomputes the chunk terms, keeping far fewer activations (opt-in until bench/gpu/kernel_check.sh has measured
// it on a GPU).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// Inputs prepared as in chunk_gated_delta_rule: q (L2-normalised, scaled), k (L2-normalised) [B, H, N, C, dk], v
// [B, H, N, C, dv], beta and g [B, H, N, C], float32, padded to whole chunks. Returns o [B, H, N, C, dv].
at::Tensor delta_rule_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                             const at::Tensor& g);

}  // namespace rlloop
