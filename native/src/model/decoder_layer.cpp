#include "model/decoder_layer.h"

#include "diagnostics/backward_timeline.h"
#include "diagnostics/profiler.h"
#include "model/rms_norm.h"

namespace rlloop {

DecoderLayer::DecoderLayer(const TextConfig& c, LayerKind kind, const WeightScope& scope)
    : kind_(kind),
      eps_(c.rms_norm_eps),
      input_norm_(scope.sub("input_layernorm").get("weight", {c.hidden_size})),
      post_norm_(scope.sub("post_attention_layernorm").get("weight", {c.hidden_size})),
      mlp_(scope.sub("mlp"), c.hidden_size, c.intermediate_size) {
  if (kind == LayerKind::GatedDeltaNet) linear_attn_ = std::make_unique<GatedDeltaNet>(c, scope.sub("linear_attn"));
  else self_attn_ = std::make_unique<GatedAttention>(c, scope.sub("self_attn"));
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const LayerInputs& in) const {
  ProfileRange range(linear_attn_ ? "layer.linear_attention" : "layer.full_attention");
  // transformers zeroes the padded positions of the linear-attention layers' normed input (apply_mask_to_padding_
  // states); the norm does it in the same pass
  at::Tensor normed = zero_centred_rms_norm(x, input_norm_, eps_, linear_attn_ ? in.padding_mask : at::Tensor());
  at::Tensor mixed = linear_attn_ ? linear_attn_->forward(normed, in.adapter)
                                  : self_attn_->forward(normed, in.rotary, in.adapter);
  at::Tensor h = x + mixed;
  BackwardTimeline::mark(h, linear_attn_ ? "layer.linear_attention" : "layer.full_attention");
  ProfileRange mlp_range("mlp");
  at::Tensor out = h + mlp_.forward(zero_centred_rms_norm(h, post_norm_, eps_), in.adapter);
  BackwardTimeline::mark(out, "mlp");
  return out;
}

std::vector<LoraLinear*> DecoderLayer::linears() {
  std::vector<LoraLinear*> out = linear_attn_ ? linear_attn_->linears() : self_attn_->linears();
  for (LoraLinear* l : mlp_.linears()) out.push_back(l);
  return out;
}

}  // namespace rlloop
