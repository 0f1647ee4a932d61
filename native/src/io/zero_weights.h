// ZeroWeights: the tensors of a stand-in model (ModelOptions::stand_in), zeros made on the device at the shapes its
// modules ask for. A stand-in runs the real model's kernels at the real shapes to pay a process's first-use costs
// (lazily loaded CUDA modules, cuBLAS and attention set-up, autograd's device threads) while the real weights still
// load. Its values need only be finite, and zeros are: every norm, softmax and gate of the model stays finite on
// them. Zeros because a fill is the one kernel the real load runs too: a pattern or a random draw would load
// modules of its own (measured: the stand-in's load took 1.4 s with a pattern made by five elementwise kernels).
#pragma once
#include "io/weights.h"

namespace rlloop {

class ZeroWeights : public WeightSource {
 public:
  at::Tensor get(const std::string& key, const std::vector<int64_t>& shape, at::ScalarType dtype, at::Device device) override;
  void check_all_used() const override {}  // nothing is stored, so nothing can go unused
};

}  // namespace rlloop
