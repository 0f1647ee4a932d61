// PatternWeights: the tensors of a stand-in model (ModelOptions::stand_in), made on the device at the shapes its
// modules ask for. A stand-in runs the real model's kernels at the real shapes to pay a process's first-use costs
// (lazily loaded CUDA modules, cuBLAS and attention set-up, autograd's device threads) while the real weights still
// load; its values only need to be finite and unremarkable.
#pragma once
#include "io/weights.h"

namespace rlloop {

class PatternWeights : public WeightSource {
 public:
  at::Tensor get(const std::string& key, const std::vector<int64_t>& shape, at::ScalarType dtype, at::Device device) override;
  void check_all_used() const override {}  // nothing is stored, so nothing can go unused
};

}  // namespace rlloop
