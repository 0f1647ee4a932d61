#include "lora/peft_files.h"

#include <future>

#include "base/check.h"
#include "io/files.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace rlloop {

namespace {

Json adapter_config(const LoraSpec& spec, const std::string& base_model) {
  Json c;
  c["peft_type"] = Json("LORA");
  c["task_type"] = Json("CAUSAL_LM");
  c["r"] = Json(spec.r);
  // An integral alpha is written as an integer, as PEFT users write it.
  c["lora_alpha"] = spec.alpha == static_cast<double>(static_cast<int64_t>(spec.alpha)) ? Json(static_cast<int64_t>(spec.alpha))
                                                                                         : Json(spec.alpha);
  c["lora_dropout"] = Json(0.0);
  if (spec.target_list.empty()) {
    c["target_modules"] = Json(spec.target_modules);
  } else {
    Json::array_t list;
    for (const auto& t : spec.target_list) list.emplace_back(t);
    c["target_modules"] = Json(std::move(list));
  }
  c["bias"] = Json("none");
  c["use_rslora"] = Json(spec.use_rslora);
  c["use_dora"] = Json(false);
  c["modules_to_save"] = Json();
  c["fan_in_fan_out"] = Json(false);
  c["init_lora_weights"] = Json(true);
  c["rank_pattern"] = Json::object();
  c["alpha_pattern"] = Json::object();
  c["layers_to_transform"] = Json();
  c["lora_bias"] = Json(false);
  c["inference_mode"] = Json(true);
  c["base_model_name_or_path"] = Json(base_model);
  return c;
}

LoraSpec parse_adapter_config(const std::string& path) {
  Json c = parse_json(read_text_file(path), path);
  auto field = [&](const char* key) -> const Json* {
    const Json* v = json_member(c, key);
    return v && !v->is_null() ? v : nullptr;
  };
  auto require = [&](const char* key) -> const Json& {
    const Json* v = field(key);
    RLLOOP_CHECK(v, Format, path << ": missing field '" << key << "'");
    return *v;
  };
  if (const Json* type = field("peft_type"))
    RLLOOP_CHECK(json_string(*type, "peft_type") == "LORA", Unsupported,
                 path << ": peft_type is '" << json_string(*type, "peft_type") << "', only LORA is supported");
  LoraSpec spec;
  spec.r = json_int(require("r"), "r");
  RLLOOP_CHECK(spec.r > 0, Format, path << ": 'r' must be positive, got " << spec.r);
  spec.alpha = json_double(require("lora_alpha"), "lora_alpha");
  const Json& targets = require("target_modules");
  if (targets.is_string()) {
    spec.target_modules = json_string(targets, "target_modules");
  } else {
    for (const Json& t : json_array(targets, "target_modules")) spec.target_list.push_back(json_string(t, "target_modules[]"));
  }
  if (const Json* v = field("use_rslora")) spec.use_rslora = json_bool(*v, "use_rslora");
  if (const Json* v = field("use_dora"))
    RLLOOP_CHECK(!json_bool(*v, "use_dora"), Unsupported, path << ": 'use_dora' is true; DoRA is not supported");
  if (const Json* v = field("bias"))
    RLLOOP_CHECK(json_string(*v, "bias") == "none", Unsupported, path << ": 'bias' must be \"none\", got \"" << json_string(*v, "bias") << "\"");
  if (const Json* v = field("modules_to_save"))
    RLLOOP_CHECK(json_array(*v, "modules_to_save").empty(), Unsupported, path << ": 'modules_to_save' is not supported");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (const Json* v = field(key))
      RLLOOP_CHECK(json_object(*v, key).empty(), Unsupported, path << ": '" << key << "' is not supported");
  if (const Json* v = field("lora_bias"))
    RLLOOP_CHECK(!json_bool(*v, "lora_bias"), Unsupported, path << ": 'lora_bias' is not supported");
  return spec;
}

}  // namespace

void save_peft_adapter(const AdapterSet& adapters, const std::string& name, const std::string& dir,
                       const std::string& base_model, const std::vector<DirectoryWriter>& beside) {
  const AdapterRecord& rec = adapters.record(name);
  const SafetensorsImage weights(adapters.tensors(name));
  const std::string config_text = adapter_config(rec.spec, base_model).dump(2) + "\n";
  const auto write_all = [&](const std::string& into) {
    std::vector<std::future<void>> others;  // joined on the way out, also when a write throws
    for (const DirectoryWriter& write : beside) others.push_back(std::async(std::launch::async, write, into));
    weights.write(into + "/adapter_model.safetensors");
    write_file_atomic(into + "/adapter_config.json", config_text);
    for (std::future<void>& other : others) other.get();
  };
  if (is_directory(dir)) {
    write_all(dir);
    return;
  }
  RLLOOP_CHECK(!path_exists(dir), Io, "cannot save adapter: '" << dir << "' exists and is not a directory");
  std::string tmp = make_temp_sibling_directory(dir);
  write_all(tmp);
  rename_and_sync(tmp, dir);
}

void load_peft_adapter(AdapterSet& adapters, const std::string& name, const std::string& dir, at::Device device) {
  RLLOOP_CHECK(is_directory(dir), NotFound, "adapter directory not found: '" << dir << "'");
  LoraSpec spec = parse_adapter_config(dir + "/adapter_config.json");
  const std::string weights = dir + "/adapter_model.safetensors";
  SafetensorsFile file(weights);
  for (const auto& [key, entry] : file.entries())
    RLLOOP_CHECK(at::isFloatingType(entry.dtype), Format, weights << ": tensor '" << key << "' is " << entry.dtype_name);
  adapters.attach(name, spec, file.load_all(at::kFloat, device), weights, device);
}

}  // namespace rlloop
