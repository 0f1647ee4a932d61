#include "model/rope.h"

#include <vector>

namespace rlloop {

TextRotary::TextRotary(const TextConfig& config, at::Device device) {
  const int64_t dim = config.rotary_dim();
  // As transformers: 1 / theta^(arange(0, dim, 2) / dim), in float32.
  at::Tensor exponents = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(dim);
  inv_freq_ = (1.0 / at::pow(config.rope_theta, exponents)).to(device);
  std::vector<int64_t> component;
  for (int64_t i = 0; i < dim / 2; ++i) {
    int64_t c = 0;
    if (i % 3 == 1 && i < 3 * config.mrope_section[1]) c = 1;
    else if (i % 3 == 2 && i < 3 * config.mrope_section[2]) c = 2;
    component.push_back(c);
  }
  component_ = at::tensor(component, at::TensorOptions().dtype(at::kLong)).to(device);
}

RotaryTables TextRotary::tables(const at::Tensor& position_ids, at::ScalarType dtype) const {
  // positions [3, B, L] -> the component each frequency uses: [half, B, L] -> [B, L, half]
  at::Tensor pos = position_ids.to(at::kFloat).index_select(0, component_).permute({1, 2, 0});
  at::Tensor freqs = pos * inv_freq_;  // one float32 product per entry, as transformers' K=1 matmul
  at::Tensor cos = freqs.cos(), sin = freqs.sin();
  return {at::cat({cos, cos}, -1).to(dtype), at::cat({sin, sin}, -1).to(dtype)};
}

at::Tensor apply_partial_rotary(const at::Tensor& x, const RotaryTables& rotary) {
  const int64_t rot = rotary.cos.size(-1), half = rot / 2;
  at::Tensor cos = rotary.cos.unsqueeze(1), sin = rotary.sin.unsqueeze(1);  // [B, 1, L, rot]
  at::Tensor x_rot = x.narrow(-1, 0, rot);
  at::Tensor x_pass = x.narrow(-1, rot, x.size(-1) - rot);
  at::Tensor rotated_half = at::cat({-x_rot.narrow(-1, half, half), x_rot.narrow(-1, 0, half)}, -1);
  return at::cat({x_rot * cos + rotated_half * sin, x_pass}, -1);
}

}  // namespace rlloop
