// LoRA Linears that read the same input, run as one: Gated DeltaNet's four input projections, attention's q, k and
// v, the MLP's gate and up. Their frozen weights are concatenated once at load (each member keeps a view of its
// rows, so nothing is held twice), the adapters' A factors stacked and their scaled B factors placed
// block-diagonally, and lora_matmul computes every member's output side by side in one GEMM. So the input is read
// once instead of once a member (twice with the adapter), the small projections (in_proj_b/a: 32 outputs) stop
// being GEMMs of their own, and in backward the input's gradient is one pass over the output (the adapter's term,
// then the base GEMM accumulated onto it) instead of one a member plus the sums autograd adds between them. The
// members stay ordinary LoraLinears for everything else (adapters attach to them by PEFT module path, the optimizer
// sees their masters).
#pragma once
#include <vector>

#include "lora/linear.h"

namespace rlloop {

struct LinearSpec {
  std::string name;  // e.g. "in_proj_qkv": the weight is "<scope prefix><name>.weight"
  int64_t out_features;
};

class LoraLinearGroup {
 public:
  LoraLinearGroup(const WeightScope& scope, const std::vector<LinearSpec>& members, int64_t in_features);

  // x [..., in] -> [..., Σ out]: the members' outputs side by side, in member order.
  at::Tensor forward(const at::Tensor& x, const std::string* adapter) const;
  // The same, split into the members' outputs (views; their gradients are gathered into one by autograd).
  std::vector<at::Tensor> forward_split(const at::Tensor& x, const std::string* adapter) const;

  LoraLinear& member(size_t i) { return members_[i]; }
  std::vector<LoraLinear*> linears();

 private:
  std::vector<LoraLinear> members_;
  std::vector<int64_t> sizes_;  // members' out_features
  int64_t in_features_, out_features_;
  at::Tensor weight_;  // [Σ out, in], model dtype, frozen; the members' weights are views of its rows
};

}  // namespace rlloop
