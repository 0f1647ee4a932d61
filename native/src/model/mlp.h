// SwiGLU MLP of every decoder layer (qwen35.md §3.3): down(silu(gate(x)) * up(x)), no biases.
#pragma once
#include "lora/group.h"

namespace rlloop {

class Mlp {
 public:
  Mlp(const WeightScope& scope /* "...layers.N.mlp." */, int64_t hidden, int64_t intermediate);
  at::Tensor forward(const at::Tensor& x, const std::string* adapter) const;
  std::vector<LoraLinear*> linears() { return {&gate_up_.member(0), &gate_up_.member(1), &down_proj_}; }

 private:
  LoraLinearGroup gate_up_;  // gate_proj and up_proj: one GEMM, their outputs side by side for swiglu_packed
  LoraLinear down_proj_;
};

}  // namespace rlloop
