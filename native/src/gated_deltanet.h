// Gated DeltaNet (`linear_attn`, qwen35.md §5): in_proj_qkv → depthwise causal conv1d (K taps) → silu → split into
// q, k [Hk heads] and v [Hv heads]; β = sigmoid(in_proj_b x); g = −exp(A_log)·softplus(in_proj_a x + dt_bias);
// the gated delta rule in float32 (state S [dk, dv] per value head); gated RMSNorm with z = in_proj_z x; out_proj.
#pragma once
#include "config.h"
#include "lora.h"

namespace rlloop {

class GatedDeltaNet {
 public:
  GatedDeltaNet(const TextConfig& config, const WeightScope& scope /* "...layers.N.linear_attn." */);
  // x [B, L, hidden] (already input-normed). padding_mask [B, L] (1 real, 0 padding) or undefined: padded rows are
  // zeroed before the projections, as transformers does, so they cannot leak through the conv into anything.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& padding_mask, const std::string* adapter) const;
  std::vector<LoraLinear*> linears() { return {&in_proj_qkv_, &in_proj_z_, &in_proj_b_, &in_proj_a_, &out_proj_}; }

 private:
  int64_t key_heads_, value_heads_, key_dim_, value_dim_, conv_kernel_;
  double eps_;
  LoraLinear in_proj_qkv_, in_proj_z_, in_proj_b_, in_proj_a_, out_proj_;
  at::Tensor conv_weight_;  // [conv_dim, 1, K]
  at::Tensor A_log_, dt_bias_;  // [Hv] in the model dtype (transformers casts them with the model)
  at::Tensor norm_weight_;  // [dv]
};

// The gated delta rule evaluated in chunks (transformers' torch_chunk_gated_delta_rule; qwen35.md §5.4): the inputs
// prepared here, the chunk terms and the scan over chunks in delta_rule_chunks.h (differentiable; gdn_ops.h: the
// triangular solves as a CUDA kernel on GPUs).
// q, k [B, L, Hk, dk] (key heads), v [B, L, H, dv], g and beta [B, L, H]; H a multiple of Hk, key head h serving
// value heads h*H/Hk … (h+1)*H/Hk - 1; any float dtype (computed in float32). q and k are L2-normalised here (eps
// 1e-6 inside the rsqrt) and q is scaled by dk^-0.5. Returns [B, L, H, dv] float32, the state starting at 0.
at::Tensor chunk_gated_delta_rule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& beta, int64_t chunk_size = 64);

}  // namespace rlloop
