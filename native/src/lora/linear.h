// LoraLinear: a frozen bias-free Linear of the language model with LoRA adapters attached by name (PEFT semantics):
//   y = W x + scale · B (A x),  scale = alpha / r,  A [r, in], B [out, r].
// A and B are float32 masters (autograd leaves). In a bfloat16 model the LoRA product runs in bfloat16 from casts of
// the masters, as PEFT under torch.autocast does (the scale applied to B before its cast, and the sum with W x in
// the base GEMM's float32 accumulator: within one bfloat16 rounding of PEFT's separate scale and add; lora/matmul.h);
// gradients flow through the casts into the float32 masters. Linears that read one input run as one GEMM through
// LoraLinearGroup (lora/group.h), which keeps these objects as its members.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/weights.h"

namespace rlloop {

struct LoraWeights {
  at::Tensor A;  // [r, in] float32
  at::Tensor B;  // [out, r] float32
  double scale = 1.0;
};

class LoraLinear {
 public:
  // Loads `<scope prefix><name>.weight` [out, in]; `path` is the module path PEFT sees
  // (e.g. "model.language_model.layers.3.self_attn.q_proj").
  LoraLinear(const WeightScope& scope, const std::string& name, int64_t out_features, int64_t in_features);

  // `adapter` null or not attached here: the base Linear only.
  at::Tensor forward(const at::Tensor& x, const std::string* adapter) const;
  // The adapter's factors in `dtype` for lora_matmul: a = A, b = scale · B (the scale on the r columns of B).
  static std::pair<at::Tensor, at::Tensor> factors(const LoraWeights& lora, at::ScalarType dtype);

  const at::Tensor& weight() const { return weight_; }

  const std::string& path() const { return path_; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  std::map<std::string, LoraWeights>& adapters() { return adapters_; }
  const std::map<std::string, LoraWeights>& adapters() const { return adapters_; }
  const LoraWeights* find(const std::string& adapter) const;

 private:
  // A group (lora/group.h) keeps its members' weights in one tensor: the member's weight becomes a view of its rows.
  // Only the group may do it, once, at load: its one GEMM and a member's own forward must read the same weight.
  friend class LoraLinearGroup;
  void rebind_weight(const at::Tensor& rows);

  std::string path_;
  int64_t out_features_, in_features_;
  at::Tensor weight_;  // [out, in], model dtype, frozen
  std::map<std::string, LoraWeights> adapters_;
};

}  // namespace rlloop
