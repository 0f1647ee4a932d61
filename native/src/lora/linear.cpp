#include "lora/linear.h"

#include <vector>

#include "base/check.h"
#include "lora/matmul.h"

namespace rlloop {

LoraLinear::LoraLinear(const WeightScope& scope, const std::string& name, int64_t out_features, int64_t in_features)
    : path_(scope.prefix() + name),
      out_features_(out_features),
      in_features_(in_features),
      weight_(scope.sub(name).get("weight", {out_features, in_features})) {}

const LoraWeights* LoraLinear::find(const std::string& adapter) const {
  auto it = adapters_.find(adapter);
  return it == adapters_.end() ? nullptr : &it->second;
}

std::pair<at::Tensor, at::Tensor> LoraLinear::factors(const LoraWeights& lora, at::ScalarType dtype) {
  // The scale rides on B: exact for PEFT's usual power-of-two alpha / r.
  return {lora.A.to(dtype), (lora.B * lora.scale).to(dtype)};
}

void LoraLinear::rebind_weight(const at::Tensor& rows) {
  RLLOOP_CHECK(rows.sizes() == weight_.sizes() && rows.scalar_type() == weight_.scalar_type(), Invalid,
               path_ << ": a rebound weight must keep the shape and dtype of the loaded one");
  weight_ = rows;
}

at::Tensor LoraLinear::forward(const at::Tensor& x, const std::string* adapter) const {
  const LoraWeights* lora = adapter ? find(*adapter) : nullptr;
  if (!lora) return at::linear(x, weight_);
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = out_features_;
  const auto [a, b] = factors(*lora, x.scalar_type());
  return lora_matmul(x.reshape({-1, in_features_}), weight_, a, b).view(out_shape);
}

}  // namespace rlloop
