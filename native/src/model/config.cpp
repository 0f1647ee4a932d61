#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "io/files.h"
#include "io/json.h"

namespace rlloop {

const char* layer_kind_name(LayerKind kind) {
  return kind == LayerKind::GatedDeltaNet ? "linear_attention" : "full_attention";
}

namespace {

// Scoped reader over one JSON object: every access names the full dotted path in its error.
class Fields {
 public:
  Fields(const Json& object, std::string path, std::string source)
      : object_(object), path_(std::move(path)), source_(std::move(source)) {
    RLLOOP_CHECK(object.is_object(), Format, source_ << ": '" << path_ << "' must be an object");
  }

  const Json* optional(const std::string& key) const {
    const Json* value = json_member(object_, key);
    return value && !value->is_null() ? value : nullptr;
  }
  const Json& required(const std::string& key) const {
    const Json* value = optional(key);
    RLLOOP_CHECK(value, Format, source_ << ": missing field '" << name(key) << "'");
    return *value;
  }
  int64_t integer(const std::string& key) const { return json_int(required(key), name(key)); }
  int64_t positive(const std::string& key) const {
    int64_t v = integer(key);
    RLLOOP_CHECK(v > 0, Format, source_ << ": '" << name(key) << "' must be positive, got " << v);
    return v;
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    const Json* v = optional(key);
    return v ? json_int(*v, name(key)) : fallback;
  }
  double number_or(const std::string& key, double fallback) const {
    const Json* v = optional(key);
    return v ? json_double(*v, name(key)) : fallback;
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    const Json* v = optional(key);
    return v ? json_string(*v, name(key)) : fallback;
  }
  bool bool_or(const std::string& key, bool fallback) const {
    const Json* v = optional(key);
    return v ? json_bool(*v, name(key)) : fallback;
  }
  Fields sub(const std::string& key) const { return Fields(required(key), name(key), source_); }
  std::optional<Fields> optional_sub(const std::string& key) const {
    const Json* v = optional(key);
    if (!v) return std::nullopt;
    return Fields(*v, name(key), source_);
  }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& source() const { return source_; }

 private:
  const Json& object_;
  std::string path_;
  std::string source_;
};

void require_value(const Fields& f, const std::string& key, const std::string& expected, const std::string& actual) {
  RLLOOP_CHECK(actual == expected, Unsupported,
               f.source() << ": unsupported '" << f.name(key) << "' = " << actual << " (only " << expected
                          << " is implemented)");
}

std::vector<LayerKind> parse_layer_types(const Fields& f, int64_t num_layers) {
  std::vector<LayerKind> kinds;
  if (const Json* types = f.optional("layer_types")) {
    const auto& items = json_array(*types, f.name("layer_types"));
    RLLOOP_CHECK(static_cast<int64_t>(items.size()) == num_layers, Format,
                 f.source() << ": '" << f.name("layer_types") << "' has " << items.size()
                            << " entries, num_hidden_layers is " << num_layers);
    for (size_t i = 0; i < items.size(); ++i) {
      std::string what = f.name("layer_types") + "[" + std::to_string(i) + "]";
      const std::string& t = json_string(items[i], what);
      // transformers' remap_legacy_layer_types: "mamba" -> linear, "attention" -> full.
      if (t == "linear_attention" || t == "mamba") kinds.push_back(LayerKind::GatedDeltaNet);
      else if (t == "full_attention" || t == "attention") kinds.push_back(LayerKind::GatedAttention);
      else RLLOOP_FAIL(Unsupported, f.source() << ": unsupported layer type '" << t << "' at '" << what << "'");
    }
    return kinds;
  }
  // Derived as transformers does when layer_types is absent: layer i is full iff (i+1) % interval == 0.
  int64_t interval = f.integer_or("full_attention_interval", 4);
  RLLOOP_CHECK(interval > 0, Format, f.source() << ": '" << f.name("full_attention_interval") << "' must be positive");
  for (int64_t i = 0; i < num_layers; ++i)
    kinds.push_back((i + 1) % interval == 0 ? LayerKind::GatedAttention : LayerKind::GatedDeltaNet);
  return kinds;
}

// rope_parameters (transformers 5) or the older rope_theta + rope_scaling pair.
void parse_rope(const Fields& f, TextConfig& t) {
  std::optional<Fields> rope =
      f.optional("rope_parameters") ? f.optional_sub("rope_parameters") : f.optional_sub("rope_scaling");
  std::string type = rope ? rope->string_or("rope_type", rope->string_or("type", "default")) : "default";
  // "mrope" was the rope_type name of older Qwen-VL configs for the same default frequencies.
  if (type == "mrope") type = "default";
  require_value(rope ? *rope : f, "rope_type", "default", type);
  t.rope_theta = rope && rope->optional("rope_theta") ? rope->number_or("rope_theta", 0) : f.number_or("rope_theta", 0);
  RLLOOP_CHECK(t.rope_theta > 0, Format, f.source() << ": missing field '" << f.name("rope_parameters.rope_theta") << "'");
  t.partial_rotary_factor = rope && rope->optional("partial_rotary_factor")
                                ? rope->number_or("partial_rotary_factor", 0.25)
                                : f.number_or("partial_rotary_factor", 0.25);
  const Json* section = rope ? rope->optional("mrope_section") : nullptr;
  RLLOOP_CHECK(section, Format, f.source() << ": missing field '" << f.name("rope_parameters.mrope_section") << "'");
  const auto& items = json_array(*section, f.name("rope_parameters.mrope_section"));
  RLLOOP_CHECK(items.size() == 3, Format, f.source() << ": 'mrope_section' must have 3 entries (T, H, W), got " << items.size());
  for (size_t i = 0; i < 3; ++i) t.mrope_section[i] = json_int(items[i], "mrope_section[" + std::to_string(i) + "]");
  int64_t sum = t.mrope_section[0] + t.mrope_section[1] + t.mrope_section[2];
  RLLOOP_CHECK(sum * 2 == t.rotary_dim(), Format,
               f.source() << ": mrope_section sums to " << sum << " but head_dim * partial_rotary_factor / 2 = "
                          << t.rotary_dim() / 2);
}

TextConfig parse_text(const Fields& f) {
  TextConfig t;
  t.vocab_size = f.positive("vocab_size");
  t.hidden_size = f.positive("hidden_size");
  t.intermediate_size = f.positive("intermediate_size");
  t.num_hidden_layers = f.positive("num_hidden_layers");
  t.num_attention_heads = f.positive("num_attention_heads");
  t.num_key_value_heads = f.positive("num_key_value_heads");
  t.head_dim = f.optional("head_dim") ? f.positive("head_dim") : t.hidden_size / t.num_attention_heads;
  t.linear_num_key_heads = f.positive("linear_num_key_heads");
  t.linear_num_value_heads = f.positive("linear_num_value_heads");
  t.linear_key_head_dim = f.positive("linear_key_head_dim");
  t.linear_value_head_dim = f.positive("linear_value_head_dim");
  t.linear_conv_kernel_dim = f.positive("linear_conv_kernel_dim");
  t.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  t.layer_types = parse_layer_types(f, t.num_hidden_layers);
  parse_rope(f, t);

  require_value(f, "hidden_act", "silu", f.string_or("hidden_act", "silu"));
  require_value(f, "attention_bias", "false", f.bool_or("attention_bias", false) ? "true" : "false");
  require_value(f, "tie_word_embeddings", "false", f.bool_or("tie_word_embeddings", false) ? "true" : "false");
  RLLOOP_CHECK(t.num_attention_heads % t.num_key_value_heads == 0, Format,
               f.source() << ": num_attention_heads " << t.num_attention_heads
                          << " is not a multiple of num_key_value_heads " << t.num_key_value_heads);
  RLLOOP_CHECK(t.linear_num_value_heads % t.linear_num_key_heads == 0, Format,
               f.source() << ": linear_num_value_heads " << t.linear_num_value_heads
                          << " is not a multiple of linear_num_key_heads " << t.linear_num_key_heads);
  return t;
}

VisionConfig parse_vision(const Fields& f) {
  VisionConfig v{};
  v.depth = f.positive("depth");
  v.hidden_size = f.positive("hidden_size");
  v.num_heads = f.positive("num_heads");
  v.intermediate_size = f.positive("intermediate_size");
  v.in_channels = f.integer_or("in_channels", 3);
  v.patch_size = f.positive("patch_size");
  v.temporal_patch_size = f.positive("temporal_patch_size");
  v.spatial_merge_size = f.positive("spatial_merge_size");
  v.out_hidden_size = f.positive("out_hidden_size");
  v.num_position_embeddings = f.positive("num_position_embeddings");
  v.layer_norm_eps = 1e-6;  // hard-coded in transformers' vision blocks (nn.LayerNorm(eps=1e-6))
  if (auto rope = f.optional_sub("rope_parameters")) v.rope_theta = rope->number_or("rope_theta", 10000.0);
  require_value(f, "hidden_act", "gelu_pytorch_tanh", f.string_or("hidden_act", "gelu_pytorch_tanh"));
  const Json* deepstack = f.optional("deepstack_visual_indexes");
  RLLOOP_CHECK(!deepstack || json_array(*deepstack, f.name("deepstack_visual_indexes")).empty(), Unsupported,
               f.source() << ": '" << f.name("deepstack_visual_indexes") << "' is not empty (DeepStack is not part of Qwen3.5)");
  int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(v.num_position_embeddings)));
  RLLOOP_CHECK(side * side == v.num_position_embeddings, Format,
               f.source() << ": '" << f.name("num_position_embeddings") << "' = " << v.num_position_embeddings
                          << " is not a square grid");
  return v;
}

}  // namespace

Qwen35Config Qwen35Config::parse(const std::string& json_text, const std::string& source) {
  Json root = parse_json(json_text, source);
  Fields top(root, "", source);
  std::string model_type = top.string_or("model_type", "");
  RLLOOP_CHECK(model_type == "qwen3_5", Unsupported,
               source << ": 'model_type' is '" << model_type << "', expected 'qwen3_5' (Qwen3_5ForConditionalGeneration)");
  Qwen35Config c;
  c.text = parse_text(top.sub("text_config"));
  if (auto vision = top.optional_sub("vision_config")) c.vision = parse_vision(*vision);
  c.image_token_id = top.integer_or("image_token_id", 248056);
  c.video_token_id = top.integer_or("video_token_id", 248057);
  c.vision_start_token_id = top.integer_or("vision_start_token_id", 248053);
  c.vision_end_token_id = top.integer_or("vision_end_token_id", 248054);
  require_value(top, "tie_word_embeddings", "false", top.bool_or("tie_word_embeddings", false) ? "true" : "false");
  if (c.vision) {
    RLLOOP_CHECK(c.vision->out_hidden_size == c.text.hidden_size, Format,
                 source << ": vision_config.out_hidden_size " << c.vision->out_hidden_size
                        << " differs from text_config.hidden_size " << c.text.hidden_size);
  }
  return c;
}

Qwen35Config Qwen35Config::load(const std::string& dir) {
  RLLOOP_CHECK(is_directory(dir), NotFound, "model directory not found: '" << dir << "'");
  std::string path = dir + "/config.json";
  return parse(read_text_file(path), path);
}

Qwen35Config Qwen35Config::stand_in() const {
  Qwen35Config c = *this;
  std::vector<LayerKind> kinds;  // each kind once, in the order the stack first has it
  for (LayerKind kind : text.layer_types)
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  c.text.layer_types = kinds;
  c.text.num_hidden_layers = static_cast<int64_t>(kinds.size());
  if (c.vision) c.vision->depth = 1;
  return c;
}

}  // namespace rlloop
