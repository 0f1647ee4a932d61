// The chunked gated delta rule's core: the chunk terms (intra-chunk decay, the UT transform's triangular solve)
// and the scan over chunks, as one autograd node with a hand-derived backward that saves only its inputs and the
// chunk-start states and recomputes the chunk terms. Measured on an H200 at the 9B shapes, 16 rows bf16
// (bench/gpu/kernel_check.sh): backward 857 vs 905 ms and activations 61.6 vs 83.9 GiB against autograd replaying
// each ATen op, which RLLOOP_GDN_BACKWARD=autograd still selects (gradients equal within 2.4e-6 in float32).
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// Inputs prepared as in chunk_gated_delta_rule: q (L2-normalised, scaled), k (L2-normalised) [B, H, N, C, dk], v
// [B, H, N, C, dv], beta and g [B, H, N, C], float32, padded to whole chunks. Returns o [B, H, N, C, dv].
at::Tensor delta_rule_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                             const at::Tensor& g);

}  // namespace rlloop
