// Vision tower forward, qwen35.md §6.2 and §7. Dimension letters: N patches (all images), S segments (frames),
// n patches per segment, D hidden_size, H heads, d head_dim, M = spatial_merge_size^2.
// Precision follows §11 / transformers 5.17: pos-embed taps and sums in fp32, RoPE in fp32, the rest in dtype.
#include "vision/tower.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/check.h"
#include "vision/rope.h"

namespace rlloop {
namespace {

std::string grid_text(const Grid& g) {
  std::ostringstream s;
  s << "(" << g[0] << ", " << g[1] << ", " << g[2] << ")";
  return s.str();
}

// Patch coordinates (row, col) in merge-block order (§7.1), frames repeated: [N, 2] int64.
at::Tensor patch_coordinates(const std::vector<Grid>& grids, int64_t merge) {
  int64_t total = 0;
  for (const Grid& g : grids) total += g[0] * g[1] * g[2];
  at::Tensor coords = at::empty({total, 2}, at::kLong);
  int64_t* out = coords.data_ptr<int64_t>();
  for (const Grid& g : grids) {
    const int64_t blocks_w = g[2] / merge;
    for (int64_t t = 0; t < g[0]; ++t)
      for (int64_t within = 0; within < g[1] * g[2]; ++within) {
        const int64_t in_col = within % merge, in_row = (within / merge) % merge;
        const int64_t block = within / (merge * merge), block_col = block % blocks_w, block_row = block / blocks_w;
        *out++ = block_row * merge + in_row;
        *out++ = block_col * merge + in_col;
      }
  }
  return coords;
}

// Bilinear align_corners=True taps along one axis, written with the same float32 operations as
// transformers' vision_utils (so bf16 towers agree to the bit): src = i*(side-1)/max(size-1, 1).
struct AxisTaps {
  int64_t tap[2];
  float weight[2];
};
AxisTaps bilinear_taps(int64_t index, int64_t size, int64_t side) {
  const float src =
      static_cast<float>(index) * static_cast<float>(side - 1) / static_cast<float>(std::max<int64_t>(size - 1, 1));
  const float floor = std::floor(src);
  AxisTaps taps{};
  for (int o = 0; o < 2; ++o) {
    taps.tap[o] = std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(floor) + o, 0), side - 1);
    const float distance = std::fabs(src - floor - static_cast<float>(o));
    taps.weight[o] = std::max(1.0f - distance, 0.0f);
  }
  return taps;
}

}  // namespace

VisionTower::Linear VisionTower::load_linear(const WeightGetter& weight, const std::string& prefix, int64_t out,
                                             int64_t in) const {
  return {weight(prefix + ".weight", {out, in}).to(device_, dtype_).contiguous(),
          weight(prefix + ".bias", {out}).to(device_, dtype_).contiguous()};
}

VisionTower::LayerNorm VisionTower::load_layer_norm(const WeightGetter& weight, const std::string& prefix,
                                                    int64_t dim) const {
  return {weight(prefix + ".weight", {dim}).to(device_, dtype_).contiguous(),
          weight(prefix + ".bias", {dim}).to(device_, dtype_).contiguous()};
}

VisionTower::VisionTower(const VisionConfig& config, const WeightGetter& weight, at::ScalarType dtype,
                         at::Device device)
    : config_(config), dtype_(dtype), device_(device) {
  const VisionConfig& c = config_;
  const std::pair<const char*, int64_t> sizes[] = {
      {"depth", c.depth}, {"hidden_size", c.hidden_size}, {"num_heads", c.num_heads},
      {"intermediate_size", c.intermediate_size}, {"in_channels", c.in_channels}, {"patch_size", c.patch_size},
      {"temporal_patch_size", c.temporal_patch_size}, {"spatial_merge_size", c.spatial_merge_size},
      {"out_hidden_size", c.out_hidden_size}, {"num_position_embeddings", c.num_position_embeddings}};
  for (const auto& [name, value] : sizes)
    RLLOOP_CHECK(value > 0, Unsupported, "vision_config." << name << " must be a positive integer, got " << value);
  RLLOOP_CHECK(c.hidden_size % c.num_heads == 0, Unsupported,
               "vision_config.hidden_size " << c.hidden_size << " is not divisible by num_heads " << c.num_heads);
  head_dim_ = c.hidden_size / c.num_heads;
  // 2-D axial RoPE: head_dim/4 frequencies per axis, (row, col) concatenated, then doubled (§6.2).
  RLLOOP_CHECK(head_dim_ % 4 == 0, Unsupported,
               "vision head_dim " << head_dim_ << " must be divisible by 4 for the 2-D rotary embedding");
  grid_side_ = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c.num_position_embeddings))));
  RLLOOP_CHECK(grid_side_ * grid_side_ == c.num_position_embeddings, Unsupported,
               "vision_config.num_position_embeddings " << c.num_position_embeddings
                   << " is not a square (the learned position grid is side x side)");
  RLLOOP_CHECK(at::isFloatingType(dtype), Unsupported, "vision tower dtype must be floating point, got " << dtype);

  const int64_t D = c.hidden_size, patch_dim = c.in_channels * c.temporal_patch_size * c.patch_size * c.patch_size;
  const int64_t merged = D * c.spatial_merge_size * c.spatial_merge_size;
  const at::Tensor conv =
      weight("patch_embed.proj.weight", {D, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size});
  patch_embed_ = {conv.reshape({D, patch_dim}).to(device_, dtype_).contiguous(),
                  weight("patch_embed.proj.bias", {D}).to(device_, dtype_).contiguous()};
  pos_embed_ = weight("pos_embed.weight", {c.num_position_embeddings, D}).to(device_, dtype_).contiguous();

  // inv_freq = 1 / theta^(arange(0, d/2, 2) / (d/2)), in fp32 on the CPU as transformers builds its buffer.
  const int64_t spatial_dim = head_dim_ / 2;
  inv_freq_ = at::pow(c.rope_theta, at::arange(0, spatial_dim, 2, at::kFloat) / spatial_dim).reciprocal().to(device_);

  blocks_.reserve(c.depth);
  for (int64_t j = 0; j < c.depth; ++j) {
    const std::string p = "blocks." + std::to_string(j);
    blocks_.push_back({load_layer_norm(weight, p + ".norm1", D), load_layer_norm(weight, p + ".norm2", D),
                       load_linear(weight, p + ".attn.qkv", 3 * D, D), load_linear(weight, p + ".attn.proj", D, D),
                       load_linear(weight, p + ".mlp.linear_fc1", c.intermediate_size, D),
                       load_linear(weight, p + ".mlp.linear_fc2", D, c.intermediate_size)});
  }
  merger_norm_ = load_layer_norm(weight, "merger.norm", D);
  merger_fc1_ = load_linear(weight, "merger.linear_fc1", merged, merged);
  merger_fc2_ = load_linear(weight, "merger.linear_fc2", c.out_hidden_size, merged);
}

void VisionTower::check_inputs(const at::Tensor& pixel_values, const std::vector<Grid>& grids) const {
  const VisionConfig& c = config_;
  const int64_t patch_dim = c.in_channels * c.temporal_patch_size * c.patch_size * c.patch_size;
  RLLOOP_CHECK(pixel_values.defined(), Invalid, "vision tower: pixel_values is undefined");
  RLLOOP_CHECK(pixel_values.dim() == 2 && pixel_values.size(1) == patch_dim, Shape,
               "vision tower: pixel_values must be [patches, " << patch_dim << "], got " << pixel_values.sizes());
  RLLOOP_CHECK(at::isFloatingType(pixel_values.scalar_type()), Invalid,
               "vision tower: pixel_values must be floating point, got " << pixel_values.scalar_type());
  int64_t total = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    const Grid& g = grids[i];
    RLLOOP_CHECK(g[0] > 0 && g[1] > 0 && g[2] > 0, Shape,
                 "vision tower: image " << i << " has grid " << grid_text(g) << "; t, gh and gw must be positive");
    RLLOOP_CHECK(g[1] % c.spatial_merge_size == 0 && g[2] % c.spatial_merge_size == 0, Shape,
                 "vision tower: image " << i << " has grid " << grid_text(g)
                     << "; gh and gw must be multiples of spatial_merge_size " << c.spatial_merge_size);
    total += g[0] * g[1] * g[2];
  }
  RLLOOP_CHECK(total == pixel_values.size(0), Shape,
               "vision tower: the grids hold " << total << " patches but pixel_values has " << pixel_values.size(0)
                   << " rows");
}

// §7.3: the side x side table resampled to each (gh, gw) with bilinear align_corners=True, as four weighted taps
// per patch summed in fp32 (transformers 5.17), then cast to the tower dtype.
at::Tensor VisionTower::position_embedding(const std::vector<Grid>& grids) const {
  const at::Tensor coords = patch_coordinates(grids, config_.spatial_merge_size);
  const int64_t N = coords.size(0);
  at::Tensor indices = at::empty({N, 4}, at::kLong);
  at::Tensor weights = at::empty({N, 4}, at::kFloat);
  const int64_t* rc = coords.data_ptr<int64_t>();
  int64_t* idx = indices.data_ptr<int64_t>();
  float* w = weights.data_ptr<float>();
  int64_t row = 0;
  for (const Grid& g : grids)
    for (int64_t p = 0; p < g[0] * g[1] * g[2]; ++p, ++row) {
      const AxisTaps h = bilinear_taps(rc[2 * row], g[1], grid_side_);
      const AxisTaps v = bilinear_taps(rc[2 * row + 1], g[2], grid_side_);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          idx[4 * row + 2 * a + b] = h.tap[a] * grid_side_ + v.tap[b];
          w[4 * row + 2 * a + b] = h.weight[a] * v.weight[b];
        }
    }
  const at::Tensor taps = pos_embed_.index_select(0, indices.view(-1).to(device_)).view({N, 4, -1});  // [N, 4, D]
  return (taps * weights.to(device_).unsqueeze(-1)).sum(1).to(dtype_);                                // fp32 sum
}

// §6.2: angles (row * inv_freq | col * inv_freq), doubled to head_dim; cos/sin stay fp32.
std::array<at::Tensor, 2> VisionTower::rotary_cos_sin(const std::vector<Grid>& grids) const {
  const at::Tensor coords = patch_coordinates(grids, config_.spatial_merge_size).to(device_);
  const at::Tensor freqs = coords.unsqueeze(-1).to(at::kFloat) * inv_freq_;  // [N, 2, d/4]
  const at::Tensor rowcol = at::cat({freqs.select(1, 0), freqs.select(1, 1)}, -1);  // [N, d/2]
  const at::Tensor angles = at::cat({rowcol, rowcol}, -1);                             // [N, d]
  return {angles.cos(), angles.sin()};
}

// Non-causal attention restricted to each frame (§7.5): consecutive segments of equal length run as one SDPA batch,
// so no mask is materialised and no compute is spent across images.
at::Tensor VisionTower::attention(const Block& block, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                  const std::vector<int64_t>& segment_lengths) const {
  const int64_t N = x.size(0), H = config_.num_heads, d = head_dim_;
  const at::Tensor qkv = at::linear(x, block.qkv.weight, block.qkv.bias).view({N, 3, H, d});
  const auto [q, k] = vision_rope(qkv, cos, sin);  // [N, H, d]
  const at::Tensor v = qkv.select(1, 2);
  const double scale = std::pow(static_cast<double>(d), -0.5);

  std::vector<at::Tensor> outputs;
  int64_t start = 0;
  for (size_t s = 0; s < segment_lengths.size();) {
    const int64_t n = segment_lengths[s];
    size_t end = s;
    while (end < segment_lengths.size() && segment_lengths[end] == n) ++end;
    const int64_t S = static_cast<int64_t>(end - s);
    auto batch = [&](const at::Tensor& t) {  // [S*n, H, d] -> [S, H, n, d]
      return t.slice(0, start, start + S * n).view({S, n, H, d}).transpose(1, 2);
    };
    const at::Tensor out = at::scaled_dot_product_attention(batch(q), batch(k), batch(v), {}, 0.0, false, scale);
    outputs.push_back(out.transpose(1, 2).reshape({S * n, H * d}));  // [S*n, D]
    start += S * n;
    s = end;
  }
  const at::Tensor attended = outputs.size() == 1 ? outputs.front() : at::cat(outputs, 0);
  return at::linear(attended, block.proj.weight, block.proj.bias);
}

at::Tensor VisionTower::block_forward(const Block& block, const at::Tensor& x, const at::Tensor& cos,
                                      const at::Tensor& sin, const std::vector<int64_t>& segment_lengths) const {
  const int64_t D = config_.hidden_size;
  const double eps = config_.layer_norm_eps;
  at::Tensor h = x + attention(block, at::layer_norm(x, {D}, block.norm1.weight, block.norm1.bias, eps), cos, sin,
                               segment_lengths);
  const at::Tensor mlp_in = at::layer_norm(h, {D}, block.norm2.weight, block.norm2.bias, eps);
  const at::Tensor mlp_hidden = at::gelu(at::linear(mlp_in, block.fc1.weight, block.fc1.bias), "tanh");
  return h + at::linear(mlp_hidden, block.fc2.weight, block.fc2.bias);
}

// §7.6: LayerNorm over D before the shuffle; M consecutive rows form one merge block; exact (erf) GELU.
at::Tensor VisionTower::merger_forward(const at::Tensor& x) const {
  const int64_t D = config_.hidden_size, M = config_.spatial_merge_size * config_.spatial_merge_size;
  const at::Tensor normed = at::layer_norm(x, {D}, merger_norm_.weight, merger_norm_.bias, config_.layer_norm_eps);
  const at::Tensor blocks = normed.reshape({-1, D * M});  // [N/M, D*M]
  const at::Tensor hidden = at::gelu(at::linear(blocks, merger_fc1_.weight, merger_fc1_.bias), "none");
  return at::linear(hidden, merger_fc2_.weight, merger_fc2_.bias);
}

at::Tensor VisionTower::forward(const at::Tensor& pixel_values, const std::vector<Grid>& grids) const {
  if (grids.empty() && (!pixel_values.defined() || pixel_values.numel() == 0))  // a text-only batch
    return at::empty({0, config_.out_hidden_size}, at::TensorOptions().dtype(dtype_).device(device_));
  check_inputs(pixel_values, grids);
  c10::NoGradGuard frozen;  // the tower is never trained; keep no graph alive

  std::vector<int64_t> segment_lengths;  // one per frame (§7.5: no attention across images or frames)
  for (const Grid& g : grids)
    for (int64_t t = 0; t < g[0]; ++t) segment_lengths.push_back(g[1] * g[2]);

  at::Tensor x = at::linear(pixel_values.to(device_, dtype_), patch_embed_.weight, patch_embed_.bias);  // [N, D]
  x = x + position_embedding(grids);
  const auto [cos, sin] = rotary_cos_sin(grids);
  for (const Block& block : blocks_) x = block_forward(block, x, cos, sin, segment_lengths);
  return merger_forward(x);  // [N / merge^2, out_hidden_size]
}

}  // namespace rlloop
