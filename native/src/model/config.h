// Qwen35Config: config.json of a Hugging Face Qwen3.5 checkpoint (`Qwen3_5ForConditionalGeneration`), parsed and
// validated once at load (qwen35.md §1). Field names mirror HF's; anything we cannot honour is an error naming the
// field, never a silent default.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vision/tower.h"

namespace rlloop {

// layer_types entries: "linear_attention" (Gated DeltaNet, §5) or "full_attention" (gated attention, §4).
enum class LayerKind { GatedDeltaNet, GatedAttention };
const char* layer_kind_name(LayerKind kind);  // the HF name

struct TextConfig {
  int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
  int64_t num_attention_heads, num_key_value_heads, head_dim;                   // gated attention
  int64_t linear_num_key_heads, linear_num_value_heads, linear_key_head_dim;  // Gated DeltaNet
  int64_t linear_value_head_dim, linear_conv_kernel_dim;
  double rms_norm_eps;
  double rope_theta;
  double partial_rotary_factor;
  std::array<int64_t, 3> mrope_section;  // frequencies for T, H, W; sums to rotary_dim() / 2
  std::vector<LayerKind> layer_types;    // num_hidden_layers entries

  int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
};

struct Qwen35Config {
  TextConfig text;
  std::optional<VisionConfig> vision;  // absent only for a text-only checkpoint without vision_config
  int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;

  // Reads and validates `<dir>/config.json`.
  static Qwen35Config load(const std::string& dir);
  static Qwen35Config parse(const std::string& json_text, const std::string& source);

  // The same shapes with one decoder layer of each kind (in the stack's order) and one vision block: a stand-in
  // model runs the real one's kernels at its shapes (ModelOptions::stand_in).
  Qwen35Config stand_in() const;
};

}  // namespace rlloop
