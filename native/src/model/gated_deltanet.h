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
  // x [B, L, hidden], input-normed with padded positions zeroed (the decoder layer folds transformers' padding
  // mask into the input norm), so they cannot leak through the conv into anything.
  at::Tensor forward(const at::Tensor& x, const std::string* adapter) const;
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
// L2-normalised (eps 1e-6 inside the rsqrt) and q is scaled by dk^-0.5. Returns the output heads-major in float32,
// [B, H, Lp, dv] with Lp = L rounded up to whole chunks (positions L.. are the padding's), the state starting at 0;
// model/rms_norm.h's gated_rms_norm_of_heads_major rounds it to the model dtype as transformers does.
at::Tensor chunk_gated_delta_rule(const at::Tensor& mixed, int64_t key_heads, int64_t key_dim, int64_t value_dim,
                                  const at::Tensor& g, const at::Tensor& beta, int64_t chunk_size = 64);

}  // namespace rlloop
