// The Qwen3.5 vision tower (`model.visual`, qwen35.md §7): patch embedding, interpolated learned position
// embedding, ViT blocks with 2-D axial RoPE and per-image attention, 2x2 patch merger. No DeepStack.
// Frozen: forward runs without autograd. Image preprocessing lives in vision/preprocess.h, text positions in model/mrope.h.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rlloop {

// Mirrors `vision_config` of config.json (HF names). hidden_act is gelu_pytorch_tanh for every Qwen3.5 checkpoint.
struct VisionConfig {
  int64_t depth, hidden_size, num_heads, intermediate_size, in_channels, patch_size, temporal_patch_size,
      spatial_merge_size, out_hidden_size, num_position_embeddings;
  double layer_norm_eps = 1e-6;
  double rope_theta = 10000.0;  // rope_parameters.rope_theta (axial)
};

// Returns the tensor stored under "model.visual." + key; the tower checks nothing beyond what the getter checks,
// so the getter must verify `shape`. Any dtype/device: the tower casts to its own.
using WeightGetter = std::function<at::Tensor(const std::string& key /* relative to "model.visual." */,
                                              const std::vector<int64_t>& shape)>;

using Grid = std::array<int64_t, 3>;  // (t, gh, gw) in patches, as image_grid_thw

class VisionTower {
 public:
  VisionTower(const VisionConfig& config, const WeightGetter& weight, at::ScalarType dtype, at::Device device);

  // pixel_values [sum N_i, C*T*P*P] float32 (any device), N_i = t*gh*gw rows per image in merge-block order (§7.1),
  // grids one per image -> [sum N_i / merge^2, out_hidden_size] in the tower's dtype, on its device,
  // rows in <|image_pad|> order. Throws on shapes that do not fit the grids.
  at::Tensor forward(const at::Tensor& pixel_values, const std::vector<Grid>& grids) const;

  const VisionConfig& config() const { return config_; }

 private:
  struct Linear {
    at::Tensor weight, bias;  // [out, in], [out]
  };
  struct LayerNorm {
    at::Tensor weight, bias;  // [hidden] each
  };
  struct Block {
    LayerNorm norm1, norm2;
    Linear qkv, proj, fc1, fc2;
  };

  Linear load_linear(const WeightGetter& weight, const std::string& prefix, int64_t out, int64_t in) const;
  LayerNorm load_layer_norm(const WeightGetter& weight, const std::string& prefix, int64_t dim) const;
  void check_inputs(const at::Tensor& pixel_values, const std::vector<Grid>& grids) const;

  at::Tensor position_embedding(const std::vector<Grid>& grids) const;               // [N, hidden], dtype
  std::array<at::Tensor, 2> rotary_cos_sin(const std::vector<Grid>& grids) const;    // [N, head_dim] fp32 each
  at::Tensor attention(const Block& block, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                       const std::vector<int64_t>& segment_lengths) const;
  at::Tensor block_forward(const Block& block, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                           const std::vector<int64_t>& segment_lengths) const;
  at::Tensor merger_forward(const at::Tensor& x) const;

  VisionConfig config_;
  at::ScalarType dtype_;
  at::Device device_;
  int64_t head_dim_, grid_side_;
  Linear patch_embed_;      // Conv3d with kernel == stride, flattened to [hidden, C*T*P*P]
  at::Tensor pos_embed_;    // [grid_side^2, hidden]
  at::Tensor inv_freq_;     // [head_dim / 4] fp32 on device_
  std::vector<Block> blocks_;
  LayerNorm merger_norm_;
  Linear merger_fc1_, merger_fc2_;
};

}  // namespace rlloop
