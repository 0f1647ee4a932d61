#include "lora.h"

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

at::Tensor LoraLinear::forward(const at::Tensor& x, const std::string* adapter) const {
  at::Tensor y = at::linear(x, weight_);
  const LoraWeights* lora = adapter ? find(*adapter) : nullptr;
  if (!lora) return y;
  const auto dtype = x.scalar_type();
  at::Tensor a = lora->A.to(dtype), b = lora->B.to(dtype);
  return y + at::linear(at::linear(x, a), b) * lora->scale;
}

}  // namespace rlloop
