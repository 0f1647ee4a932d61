#include "model/mlp.h"

#include "model/swiglu.h"

namespace rlloop {

Mlp::Mlp(const WeightScope& scope, int64_t hidden, int64_t intermediate)
    : gate_up_(scope, {{"gate_proj", intermediate}, {"up_proj", intermediate}}, hidden),
      down_proj_(scope, "down_proj", hidden, intermediate) {}

at::Tensor Mlp::forward(const at::Tensor& x, const std::string* adapter) const {
  return down_proj_.forward(swiglu_packed(gate_up_.forward(x, adapter)), adapter);
}

}  // namespace rlloop
