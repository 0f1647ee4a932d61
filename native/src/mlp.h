// SwiGLU MLP of every decoder layer (qwen35.md §3.3): down(silu(gate(x)) * up(x)), no biases.
#pragma once
#include "lora.h"

namespace rlloop {

class Mlp {
 public:
  Mlp(const WeightScope& scope /* "...layers.N.mlp." */, int64_t hidden, int64_t intermediate);
  at::Tensor forward(const at::Tensor& x, const std::string* adapter) const;
  std::vector<LoraLinear*> linears() { return {&gate_proj_, &up_proj_, &down_proj_}; }

 private:
  LoraLinear gate_proj_, up_proj_, down_proj_;
};

}  // namespace rlloop
