// Text rotary embedding: partial, interleaved 3-D M-RoPE (qwen35.md §6.1). Frequency i takes its angle from the
// H position when i % 3 == 1 and i < 3·section[1], from W when i % 3 == 2 and i < 3·section[2], else from T.
// Only the first rotary_dim channels of each head rotate, with split-half (NeoX) pairing.
#pragma once
#include <ATen/ATen.h>

#include "model/config.h"

namespace rlloop {

struct RotaryTables {
  at::Tensor cos, sin;  // [B, L, rotary_dim], in the activation dtype (cos/sin computed in float32, then cast)
};

class TextRotary {
 public:
  TextRotary(const TextConfig& config, at::Device device);
  // position_ids [3, B, L] int64 (T, H, W) on the model's device.
  RotaryTables tables(const at::Tensor& position_ids, at::ScalarType dtype) const;

 private:
  at::Tensor inv_freq_;   // [rotary_dim / 2] float32
  at::Tensor component_;  // [rotary_dim / 2] int64: 0 = T, 1 = H, 2 = W
};

// x [B, H, L, head_dim]: rotates channels [0, rotary_dim) and passes the rest through.
at::Tensor apply_partial_rotary(const at::Tensor& x, const RotaryTables& rotary);

}  // namespace rlloop
