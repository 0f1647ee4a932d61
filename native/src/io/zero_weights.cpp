#include "io/zero_weights.h"

namespace rlloop {

at::Tensor ZeroWeights::get(const std::string&, const std::vector<int64_t>& shape, at::ScalarType dtype, at::Device device) {
  return at::zeros(shape, at::TensorOptions().dtype(dtype).device(device));
}

}  // namespace rlloop
