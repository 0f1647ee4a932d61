// Gated full attention (`self_attn`, qwen35.md §4): q_proj yields per head [query | output gate]; q_norm/k_norm are
// zero-centred RMSNorms over head_dim; partial M-RoPE on q and k; GQA; causal softmax attention;
// o = o ⊙ sigmoid(gate) before o_proj.
#pragma once
#include "lora/group.h"
#include "model/config.h"
#include "model/rope.h"

namespace rlloop {

class GatedAttention {
 public:
  GatedAttention(const TextConfig& config, const WeightScope& scope /* "...layers.N.self_attn." */);
  // x [B, L, hidden] (already input-normed) -> [B, L, hidden]. Rows are right-padded: the causal mask alone keeps
  // padded keys away from real queries, so no padding mask is needed.
  at::Tensor forward(const at::Tensor& x, const RotaryTables& rotary, const std::string* adapter) const;
  std::vector<LoraLinear*> linears() {
    std::vector<LoraLinear*> out = qkv_proj_.linears();  // q_proj, k_proj, v_proj
    out.push_back(&o_proj_);
    return out;
  }

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double eps_;
  LoraLinearGroup qkv_proj_;  // q_proj, k_proj, v_proj: one GEMM
  LoraLinear o_proj_;
  at::Tensor q_norm_, k_norm_;  // [head_dim]
};

}  // namespace rlloop
