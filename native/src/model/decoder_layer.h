// One Qwen3.5 decoder layer (qwen35.md §3.2), pre-norm residual:
//   h  = x + Mixer(input_layernorm(x)),  Mixer = Gated DeltaNet or gated attention per layer_types
//   x' = h + Mlp(post_attention_layernorm(h))
#pragma once
#include <memory>

#include "model/gated_attention.h"
#include "model/gated_deltanet.h"
#include "model/mlp.h"

namespace rlloop {

// What every layer of one forward shares.
struct LayerInputs {
  RotaryTables rotary;       // for the attention layers
  at::Tensor padding_mask;   // [B, L] in the model dtype, undefined when no row is padded (GDN layers)
  const std::string* adapter = nullptr;  // LoRA adapter to apply, null = base model
};

class DecoderLayer {
 public:
  DecoderLayer(const TextConfig& config, LayerKind kind, const WeightScope& scope /* "...layers.N." */);
  at::Tensor forward(const at::Tensor& x, const LayerInputs& in) const;
  LayerKind kind() const { return kind_; }
  std::vector<LoraLinear*> linears();

 private:
  LayerKind kind_;
  double eps_;
  at::Tensor input_norm_, post_norm_;  // [hidden], zero-centred
  std::unique_ptr<GatedDeltaNet> linear_attn_;
  std::unique_ptr<GatedAttention> self_attn_;
  Mlp mlp_;
};

}  // namespace rlloop
