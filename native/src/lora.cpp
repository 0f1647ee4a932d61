#include "lora.h"

#include <vector>

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
  const LoraWeights* lora = adapter ? find(*adapter) : nullptr;
  if (!lora) return at::linear(x, weight_);
  // The adapter's term is the base product's accumulator input (addmm_ with beta = 1): the sum happens in the
  // GEMM's float32 epilogue, one pass over y instead of three separate ones (scale, add, base product), and the
  // scale rides on B (r columns) — exact for PEFT's usual power-of-two alpha / r.
  const auto dtype = x.scalar_type();
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.back() = out_features_;
  const at::Tensor x2 = x.reshape({-1, in_features_});
  const at::Tensor a = lora->A.to(dtype), b = (lora->B * lora->scale).to(dtype);
  at::Tensor y = at::mm(at::mm(x2, a.t()), b.t());  // mm saves its inputs, not this output: safe to update in place
  return y.addmm_(x2, weight_.t()).view(out_shape);
}

}  // namespace rlloop
