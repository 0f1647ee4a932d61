// Gated DeltaNet (`linear_attn`, qwen35.md §5): in_proj_qkv → depthwise causal conv1d (K taps) → silu → split into
// q, k [Hk heads] and v [Hv heads]; β = sigmoid(in_proj_b x); g = −exp(A_log)·softplus(in_proj_a x + dt_bias);
// the gated delta rule in float32 (state S [dk, dv] per value head); gated RMSNorm with z = in_proj_z x; out_proj.
#pragma once
#include "lora/group.h"
#include "model/config.h"

namespace rlloop {

class GatedDeltaNet {
 public:
  GatedDeltaNet(const TextConfig& config, const WeightScope& scope /* "...layers.N.linear_attn." */);
  // x [B, L, hidden] (already input-normed). padding_mask [B, L] (1 real, 0 padding) or undefined: padded rows are
  // zeroed before the projections, as transformers does, so they cannot leak through the conv into anything.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& padding_mask, const std::string* adapter) const;
  std::vector<LoraLinear*> linears() {
    std::vector<LoraLinear*> out = in_proj_.linears();  // in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
    out.push_back(&out_proj_);
    return out;
  }

 private:
  int64_t key_heads_, value_heads_, key_dim_, value_dim_, conv_kernel_;
  double eps_;
  LoraLinearGroup in_proj_;  // in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: one GEMM
  LoraLinear out_proj_;
  at::Tensor conv_weight_;  // [conv_dim, 1, K]
  at::Tensor A_log_, dt_bias_;  // [Hv] in the model dtype (transformers casts them with the model)
  at::Tensor norm_weight_;  // [dv]
};

// The gated delta rule evaluated in chunks (transformers' torch_chunk_gated_delta_rule; qwen35.md §5.4): q, k, v
// from the conv output in model/qkv_heads.h, the chunk terms and the scan over chunks in delta_rule/aten.h
// (differentiable; CUDA kernels on GPUs for the head layout and the triangular solves).
// mixed [B, L, 2·Hk·dk + H·dv] (q's key heads, k's, v's value heads; any float dtype, computed in float32), g and
// beta [B, L, H]; H a multiple of Hk, key head j serving value heads j·H/Hk … (j+1)·H/Hk − 1. q and k are
// L2-normalised (eps 1e-6 inside the rsqrt) and q is scaled by dk^-0.5. Returns [B, L, H, dv] in `dtype` (computed
// in float32, then rounded, as transformers rounds the core's output to the model dtype), contiguous, the state
// starting at 0.
at::Tensor chunk_gated_delta_rule(const at::Tensor& mixed, int64_t key_heads, int64_t key_dim, int64_t value_dim,
                                  const at::Tensor& g, const at::Tensor& beta, at::ScalarType dtype,
                                  int64_t chunk_size = 64);

}  // namespace rlloop
