// Node-API glue only: the addon's exports, set at the end of this file (the NativeModel, NativeBatch,
// NativeOptimizer and NativeProcessGroup classes; loadModel, initProcessGroup, preprocessImage, the device memory
// statistics and deltaRuleCheck).
// Inputs are validated and copied on the JS thread; tensor work runs on each model's worker (js/async.h);
// src/native.ts is the typed face of these exports (docs/native-api.md).
#include <napi.h>

#include <ATen/ATen.h>

#include <array>
#include <memory>
#include <optional>
#include <set>

#include "base/check.h"
#include "delta_rule/check.h"
#include "diagnostics/device_memory.h"
#include "dist/process_group.h"
#include "js/async.h"
#include "js/convert.h"
#include "runtime/session.h"
#include "vision/preprocess.h"

namespace rlloop {
namespace {

struct AddonData {
  Napi::FunctionReference model_class, batch_class, optimizer_class, group_class;
  int construction_token = 0;  // its address, passed as an External, marks constructions made by this file
};

AddonData& addon(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

// NativeModel / NativeBatch objects only come from loadModel() / model.prepare(): JS cannot build an empty one.
Napi::Value internal_token(Napi::Env env) { return Napi::External<int>::New(env, &addon(env).construction_token); }
void require_internal(const Napi::CallbackInfo& info, const char* cls, const char* factory) {
  if (info.Length() == 1 && info[0].IsExternal() && info[0].As<Napi::External<int>>().Data() == &addon(info.Env()).construction_token)
    return;
  Napi::Error error = Napi::TypeError::New(info.Env(), std::string(cls) + " cannot be constructed directly; use " + factory);
  error.Set("code", Napi::String::New(info.Env(), "ERR_RLLOOP_INVALID"));
  throw error;
}

// Converts a C++ exception thrown on the JS thread into a JS Error with the rlloop code.
[[noreturn]] void rethrow_as_js(Napi::Env env, const std::string& operation) {
  std::string message, code;
  describe_exception(std::current_exception(), message, code);
  Napi::Error error = Napi::Error::New(env, operation + ": " + message);
  error.Set("code", Napi::String::New(env, code));
  throw error;
}

// Runs `body` on the JS thread, converting any non-JS exception.
template <typename F>
auto guarded(Napi::Env env, const std::string& operation, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    rethrow_as_js(env, operation);
  }
}

// loadModel's options object → LoadOptions; a missing field takes its default, a wrong one is a TypeError naming it.
LoadOptions load_options(const Napi::Value& value) {
  const Napi::Object o = require_object(value, "Model.load: opts");
  LoadOptions options;
  options.device = require_string(member(o, "device"), "Model.load: opts.device");
  options.dtype = require_string(member(o, "dtype"), "Model.load: opts.dtype");
  const std::string checkpointing = require_choice(member(o, "checkpointing"), "Model.load: opts.checkpointing", {"auto", "on", "off"});
  options.model.checkpointing = checkpointing == "on" ? Checkpointing::On : checkpointing == "off" ? Checkpointing::Off : Checkpointing::Auto;
  if (!is_missing(member(o, "visionCacheBytes"))) {
    const int64_t bytes = require_integer(member(o, "visionCacheBytes"), "Model.load: opts.visionCacheBytes");
    if (bytes < 0) throw_type_error(o.Env(), "Model.load: opts.visionCacheBytes", "a byte count >= 0", member(o, "visionCacheBytes"));
    options.model.vision_cache_bytes = bytes;
  }
  const std::string tf32 = require_choice(member(o, "tf32"), "Model.load: opts.tf32", {"auto", "on", "off"});
  options.model.tf32 = tf32 == "on" ? Tf32::On : tf32 == "off" ? Tf32::Off : Tf32::Auto;
  const std::string attention = require_choice(member(o, "attention"), "Model.load: opts.attention", {"flash", "cudnn"});
  options.model.attention = attention == "cudnn" ? Attention::Cudnn : Attention::Flash;
  const Napi::Value stand_in = member(o, "standIn");
  if (!is_missing(stand_in)) {
    if (!stand_in.IsBoolean()) throw_type_error(o.Env(), "Model.load: opts.standIn", "a boolean", stand_in);
    options.model.stand_in = stand_in.As<Napi::Boolean>().Value();
  }
  return options;
}

// ---------------------------------------------------------------------------------------------------------------
class BatchWrap : public Napi::ObjectWrap<BatchWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeBatch",
                       {InstanceAccessor<&BatchWrap::B>("B"), InstanceAccessor<&BatchWrap::L>("L"),
                        InstanceAccessor<&BatchWrap::K>("K")});
  }
  explicit BatchWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<BatchWrap>(info) {
    require_internal(info, "NativeBatch", "model.prepare()");
  }

  std::shared_ptr<PreparedBatch> batch;

 private:
  Napi::Value B(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(batch->B)); }
  Napi::Value L(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(batch->L)); }
  Napi::Value K(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(batch->K)); }
};

// ---------------------------------------------------------------------------------------------------------------
class ModelWrap : public Napi::ObjectWrap<ModelWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeModel",
                       {InstanceMethod<&ModelWrap::Info>("info"),
                        InstanceMethod<&ModelWrap::Prepare>("prepare"),
                        InstanceMethod<&ModelWrap::Logprobs>("logprobs"),
                        InstanceMethod<&ModelWrap::Backward>("backward"),
                        InstanceMethod<&ModelWrap::Inspect>("inspect"),
                        InstanceMethod<&ModelWrap::AddAdapter>("addAdapter"),
                        InstanceMethod<&ModelWrap::RemoveAdapter>("removeAdapter"),
                        InstanceMethod<&ModelWrap::LoadAdapter>("loadAdapter"),
                        InstanceMethod<&ModelWrap::SaveAdapter>("saveAdapter"),
                        InstanceMethod<&ModelWrap::SetTrainable>("setTrainable"),
                        InstanceMethod<&ModelWrap::AdapterNames>("adapterNames"),
                        InstanceMethod<&ModelWrap::AdapterTensors>("adapterTensors"),
                        InstanceMethod<&ModelWrap::SetAdapterTensors>("setAdapterTensors"),
                        InstanceMethod<&ModelWrap::Gradients>("gradients"),
                        InstanceMethod<&ModelWrap::VisionCached>("visionCached"),
                        InstanceMethod<&ModelWrap::VisionCacheStats>("visionCacheStats"),
                        InstanceMethod<&ModelWrap::ClearVisionCache>("clearVisionCache"),
                        InstanceMethod<&ModelWrap::Close>("close")});
  }

  explicit ModelWrap(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<ModelWrap>(info) {
    require_internal(info, "NativeModel", "Model.load()");
    // Only a JS error may leave an ObjectWrap's constructor: node-addon-api unwinds a failed construction for
    // those, while any other exception crossed into V8 with the half-built wrapper registered (a crash at the next
    // GC: a misspelt RLLOOP_PROFILE_WINDOWS, read by the runner's profiler here, segfaulted the process).
    guarded(info.Env(), "Model.load", [&] {
      runner = std::make_unique<AsyncRunner>(info.Env());
      prepare_runner = std::make_unique<AsyncRunner>(info.Env(), /*profiled=*/false);
    });
  }

  // loadModel(dir, {device, dtype, checkpointing?, visionCacheBytes?, tf32?, attention?}): Promise<NativeModel>
  static Napi::Value Load(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const std::string dir = require_string(info[0], "Model.load: dir");
    const LoadOptions options = load_options(info[1]);
    Napi::Object object = addon(env).model_class.New({internal_token(env)});
    ModelWrap* wrap = Unwrap(object);
    return wrap->runner->run(env, "Model.load('" + dir + "')", object, [wrap, dir, options]() -> JsResult {
      auto session = std::make_shared<ModelSession>(dir, options);
      auto paths = session->module_paths();
      return [wrap, session, paths](Napi::Env) -> Napi::Value {
        wrap->session = session;
        wrap->module_paths = paths;
        return wrap->Value();
      };
    });
  }

  std::unique_ptr<AsyncRunner> runner;
  // prepare() runs here, beside the worker: the next batch is collated and uploaded while the current one computes
  // (runtime/device_upload.h). It only reads the model's config and its thread-safe vision cache.
  std::unique_ptr<AsyncRunner> prepare_runner;
  std::shared_ptr<ModelSession> session;
  std::vector<std::string> module_paths;
  std::set<std::string> names;  // adapter names as the JS thread sees them (the worker applies changes in order)
  std::string trainable;

  // The session, or a JS Error once close() has dropped it.
  const std::shared_ptr<ModelSession>& live(Napi::Env env) const {
    if (!session) {
      Napi::Error error = Napi::Error::New(env, "the model was closed (model.close())");
      error.Set("code", Napi::String::New(env, "ERR_RLLOOP_INVALID"));
      throw error;
    }
    return session;
  }

 private:
  Napi::Value Info(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const ModelSession& s = *live(env);
    const Qwen35Config& c = s.config();
    Napi::Object o = Napi::Object::New(env);
    o.Set("hiddenSize", c.text.hidden_size);
    o.Set("intermediateSize", c.text.intermediate_size);
    o.Set("numLayers", c.text.num_hidden_layers);
    o.Set("vocabSize", c.text.vocab_size);
    Napi::Array kinds = Napi::Array::New(env, c.text.layer_types.size());
    for (size_t i = 0; i < c.text.layer_types.size(); ++i) kinds.Set(static_cast<uint32_t>(i), layer_kind_name(c.text.layer_types[i]));
    o.Set("layerTypes", kinds);
    o.Set("imageTokenId", c.image_token_id);
    o.Set("videoTokenId", c.video_token_id);
    o.Set("visionStartTokenId", c.vision_start_token_id);
    o.Set("visionEndTokenId", c.vision_end_token_id);
    if (c.vision) {
      Napi::Object v = Napi::Object::New(env);
      v.Set("patchSize", c.vision->patch_size);
      v.Set("temporalPatchSize", c.vision->temporal_patch_size);
      v.Set("mergeSize", c.vision->spatial_merge_size);
      v.Set("inChannels", c.vision->in_channels);
      v.Set("depth", c.vision->depth);
      v.Set("hiddenSize", c.vision->hidden_size);
      o.Set("vision", v);
    } else {
      o.Set("vision", env.Null());
    }
    o.Set("device", s.device().str());
    o.Set("dtype", s.dtype() == at::kBFloat16 ? "bfloat16" : "float32");
    Napi::Array modules = Napi::Array::New(env, module_paths.size());
    for (size_t i = 0; i < module_paths.size(); ++i) modules.Set(static_cast<uint32_t>(i), module_paths[i]);
    o.Set("loraModules", modules);
    return o;
  }

  std::shared_ptr<PreparedBatch> batch_arg(const Napi::Value& v, const std::string& operation) {
    Napi::Env env = v.Env();
    if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(addon(env).batch_class.Value()))
      throw_type_error(env, operation + ": batch", "a Batch from model.prepare()", v);
    auto batch = BatchWrap::Unwrap(v.As<Napi::Object>())->batch;
    if (batch->owner != live(env)->batch_owner())
      throw_type_error(env, operation + ": batch", "a Batch prepared by this model", v);
    return batch;
  }

  // null/undefined -> no adapter; otherwise a known adapter name.
  std::optional<std::string> adapter_arg(const Napi::Value& v, const std::string& what) {
    if (is_missing(v)) return std::nullopt;
    std::string name = require_string(v, what);
    if (!names.count(name)) throw_type_error(v.Env(), what, "the name of an adapter of this model", v);
    return name;
  }

  std::string known_adapter(const Napi::Value& v, const std::string& what) {
    auto name = adapter_arg(v, what);
    if (!name) throw_type_error(v.Env(), what, "an adapter name", v);
    return *name;
  }

  Napi::Value Prepare(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsArray()) throw_type_error(env, "prepare: rows", "an array of rows", info[0]);
    Napi::Array array = info[0].As<Napi::Array>();
    const Qwen35Config& c = live(info.Env())->config();
    const int64_t patch_dim = c.vision ? c.vision->in_channels * c.vision->temporal_patch_size * c.vision->patch_size *
                                             c.vision->patch_size
                                       : 0;
    std::vector<RowInput> rows(array.Length());
    for (uint32_t i = 0; i < array.Length(); ++i) {
      const std::string where = "prepare: rows[" + std::to_string(i) + "]";
      Napi::Object o = require_object(array.Get(i), where);
      RowInput& row = rows[i];
      row.input_ids = ints_from_int32(member(o, "inputIds"), where + ".inputIds");
      row.score_start = require_integer(member(o, "scoreStart"), where + ".scoreStart");
      row.score_count = require_integer(member(o, "scoreCount"), where + ".scoreCount");
      Napi::Value images = member(o, "images");
      if (is_missing(images)) continue;
      if (!images.IsArray()) throw_type_error(env, where + ".images", "an array", images);
      Napi::Array list = images.As<Napi::Array>();
      for (uint32_t j = 0; j < list.Length(); ++j) {
        const std::string iw = where + ".images[" + std::to_string(j) + "]";
        Napi::Object img = require_object(list.Get(j), iw);
        Napi::Value grid_value = member(img, "grid");
        if (!grid_value.IsArray() || grid_value.As<Napi::Array>().Length() != 3)
          throw_type_error(env, iw + ".grid", "[t, gh, gw]", grid_value);
        Napi::Array g = grid_value.As<Napi::Array>();
        Grid grid{require_integer(g.Get(0u), iw + ".grid[0]"), require_integer(g.Get(1u), iw + ".grid[1]"),
                  require_integer(g.Get(2u), iw + ".grid[2]")};
        if (patch_dim == 0) throw_type_error(env, iw, "absent: the model has no vision tower", img);
        Napi::Value key_value = member(img, "cacheKey");
        const std::string key = is_missing(key_value) ? std::string() : require_string(key_value, iw + ".cacheKey");
        Napi::Value pixel_value = member(img, "pixelValues");
        if (is_missing(pixel_value) && key.empty())
          throw_type_error(env, iw + ".pixelValues", "a Float32Array (or a cacheKey of cached features)", pixel_value);
        at::Tensor pixels = is_missing(pixel_value) ? at::Tensor()
                                                    : tensor_from_float32(pixel_value, {grid[0] * grid[1] * grid[2], patch_dim},
                                                                          iw + ".pixelValues");
        row.images.push_back({pixels, grid, key});
      }
    }
    auto s = live(info.Env());
    return prepare_runner->run(env, "prepare", Value(), [s, rows = std::move(rows)]() -> JsResult {
      auto batch = s->prepare(rows);
      return [batch](Napi::Env env) -> Napi::Value {
        Napi::Object object = addon(env).batch_class.New({internal_token(env)});
        BatchWrap::Unwrap(object)->batch = batch;
        return object;
      };
    });
  }

  Napi::Value Logprobs(const Napi::CallbackInfo& info) {
    auto batch = batch_arg(info[0], "logprobs");
    auto adapter = adapter_arg(info[1], "logprobs: adapter");
    auto s = live(info.Env());
    return runner->run(info.Env(), "logprobs", Value(), [s, batch, adapter]() -> JsResult {
      LogprobsResult r = s->logprobs(*batch, adapter ? &*adapter : nullptr);
      const int64_t K = batch->K;
      return [r, K](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("logp", to_float32_array(env, r.logp));
        o.Set("correct", to_uint8_array(env, r.correct));
        o.Set("K", Napi::Number::New(env, static_cast<double>(K)));
        return o;
      };
    });
  }

  Objective objective_arg(const Napi::Value& v, int64_t B) {
    Napi::Object o = require_object(v, "backward: objective");
    const std::string kind = require_string(member(o, "kind"), "backward: objective.kind");
    if (kind == "sft") return SftObjective{require_number(member(o, "scale"), "backward: objective.scale")};
    if (kind != "ppo") throw_type_error(v.Env(), "backward: objective.kind", "\"sft\" or \"ppo\"", member(o, "kind"));
    PpoObjective p;
    p.n = require_integer(member(o, "n"), "backward: objective.n");
    if (p.n <= 0) throw_type_error(v.Env(), "backward: objective.n", "a positive integer", member(o, "n"));
    // absent: on-policy, this forward's own log-probs (optim/objectives.h)
    if (!is_missing(member(o, "old"))) p.old = tensor_from_float32(member(o, "old"), {B}, "backward: objective.old");
    if (!is_missing(member(o, "ref"))) p.ref = tensor_from_float32(member(o, "ref"), {B, p.n}, "backward: objective.ref");
    p.adv = tensor_from_float32(member(o, "adv"), {B}, "backward: objective.adv");
    if (!is_missing(member(o, "weight"))) p.weight = tensor_from_float32(member(o, "weight"), {B}, "backward: objective.weight");
    p.clip = require_number(member(o, "clip"), "backward: objective.clip");
    p.beta = require_number(member(o, "beta"), "backward: objective.beta");
    p.scale = require_number(member(o, "scale"), "backward: objective.scale");
    return p;
  }

  Napi::Value Backward(const Napi::CallbackInfo& info) {
    auto batch = batch_arg(info[0], "backward");
    Objective objective = objective_arg(info[1], batch->B);
    if (trainable.empty())
      throw_type_error(info.Env(), "backward", "called after setTrainable(name)", Napi::String::New(info.Env(), "no trainable adapter"));
    auto s = live(info.Env());
    return runner->run(info.Env(), "backward", Value(), [s, batch, objective]() -> JsResult {
      BackwardResult r = s->backward(*batch, objective);
      return [r](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        o.Set("loss", Napi::Number::New(env, r.loss));
        o.Set("logp", to_float32_array(env, r.logp));
        o.Set("recomputedLayers", Napi::Number::New(env, static_cast<double>(r.recomputed_layers)));
        if (r.pg.defined()) {
          o.Set("pg", to_float32_array(env, r.pg));
          o.Set("kl", to_float32_array(env, r.kl));
          o.Set("ratio", to_float32_array(env, r.ratio));
        }
        return o;
      };
    });
  }

  Napi::Value Inspect(const Napi::CallbackInfo& info) {
    auto batch = batch_arg(info[0], "inspect");
    auto adapter = adapter_arg(info[1], "inspect: adapter");
    auto s = live(info.Env());
    return runner->run(info.Env(), "inspect", Value(), [s, batch, adapter]() -> JsResult {
      auto r = std::make_shared<InspectResult>(s->inspect(*batch, adapter ? &*adapter : nullptr));
      return [r](Napi::Env env) -> Napi::Value {
        Napi::Object o = Napi::Object::New(env);
        Napi::Array vision = Napi::Array::New(env, r->vision_features.size());
        for (size_t i = 0; i < r->vision_features.size(); ++i)
          vision.Set(static_cast<uint32_t>(i), to_float32_array(env, r->vision_features[i]));
        o.Set("visionFeatures", vision);
        o.Set("positionIds", to_int32_array(env, r->position_ids));
        Napi::Array hidden = Napi::Array::New(env, r->hidden_states.size());
        for (size_t i = 0; i < r->hidden_states.size(); ++i)
          hidden.Set(static_cast<uint32_t>(i), to_float32_array(env, r->hidden_states[i]));
        o.Set("hiddenStates", hidden);
        o.Set("logits", to_float32_array(env, r->logits));
        return o;
      };
    });
  }

  std::string new_adapter_name(const Napi::Value& v, const std::string& what) {
    std::string name = require_string(v, what);
    if (name.empty()) throw_type_error(v.Env(), what, "a non-empty string", v);
    if (names.count(name)) throw_type_error(v.Env(), what, "a new adapter name (it exists already)", v);
    return name;
  }

  Napi::Value AddAdapter(const Napi::CallbackInfo& info) {
    auto s = live(info.Env());  // first: a closed model changes nothing
    Napi::Env env = info.Env();
    std::string name = new_adapter_name(info[0], "addAdapter: name");
    Napi::Object o = require_object(info[1], "addAdapter: spec");
    LoraSpec spec;
    spec.r = require_integer(member(o, "r"), "addAdapter: spec.r");
    if (spec.r <= 0) throw_type_error(env, "addAdapter: spec.r", "a positive integer", member(o, "r"));
    spec.alpha = require_number(member(o, "alpha"), "addAdapter: spec.alpha");
    spec.target_modules = require_string(member(o, "targetModules"), "addAdapter: spec.targetModules");
    spec.seed = require_integer(member(o, "seed"), "addAdapter: spec.seed");
    guarded(env, "addAdapter", [&] { return matching_modules(module_paths, spec); });  // invalid regex, no match
    names.insert(name);
    runner->post("addAdapter('" + name + "')", [s, name, spec] { s->adapters().add(name, spec, s->device()); });
    return env.Undefined();
  }

  Napi::Value RemoveAdapter(const Napi::CallbackInfo& info) {
    auto s = live(info.Env());  // first: a closed model changes nothing
    std::string name = known_adapter(info[0], "removeAdapter: name");
    names.erase(name);
    if (trainable == name) trainable.clear();
    runner->post("removeAdapter('" + name + "')", [s, name] { s->adapters().remove(name); });
    return info.Env().Undefined();
  }

  Napi::Value LoadAdapter(const Napi::CallbackInfo& info) {
    auto s = live(info.Env());  // first: a closed model changes nothing
    std::string name = new_adapter_name(info[0], "loadAdapter: name");
    std::string dir = require_string(info[1], "loadAdapter: dir");
    names.insert(name);  // reserved now so that later calls see it; released if loading fails
    return runner->run(
        info.Env(), "loadAdapter('" + dir + "')", Value(),
        [s, name, dir]() -> JsResult {
          s->load_adapter(name, dir);
          return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
        },
        [this, name] { names.erase(name); });
  }

  Napi::Value SaveAdapter(const Napi::CallbackInfo& info) {
    std::string name = known_adapter(info[0], "saveAdapter: name");
    std::string dir = require_string(info[1], "saveAdapter: dir");
    auto s = live(info.Env());
    return runner->run(info.Env(), "saveAdapter('" + dir + "')", Value(), [s, name, dir]() -> JsResult {
      s->save_adapter(name, dir);
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  Napi::Value SetTrainable(const Napi::CallbackInfo& info) {
    auto s = live(info.Env());  // first: a closed model changes nothing
    auto name = adapter_arg(info[0], "setTrainable: name");
    trainable = name ? *name : std::string();
    runner->post("setTrainable", [s, name] { s->adapters().set_trainable(name ? &*name : nullptr); });
    return info.Env().Undefined();
  }

  Napi::Value AdapterNames(const Napi::CallbackInfo& info) {
    live(info.Env());
    Napi::Array out = Napi::Array::New(info.Env(), names.size());
    uint32_t i = 0;
    for (const std::string& n : names) out.Set(i++, n);
    return out;
  }

  // Snapshot copies on the CPU, so later training steps cannot change what JS receives.
  static NamedTensorList snapshot(const NamedTensorList& tensors) {
    NamedTensorList out;
    for (const auto& [key, t] : tensors) out.emplace_back(key, t.detach().to(at::kCPU, at::kFloat, false, /*copy=*/true));
    return out;
  }

  Napi::Value AdapterTensors(const Napi::CallbackInfo& info) {
    std::string name = known_adapter(info[0], "adapterTensors: name");
    auto s = live(info.Env());
    return runner->run(info.Env(), "adapterTensors", Value(), [s, name]() -> JsResult {
      auto tensors = snapshot(s->adapters().tensors(name));
      return [tensors](Napi::Env env) -> Napi::Value { return to_named_tensors(env, tensors); };
    });
  }

  Napi::Value SetAdapterTensors(const Napi::CallbackInfo& info) {
    std::string name = known_adapter(info[0], "setAdapterTensors: name");
    auto tensors = from_named_tensors(info[1], "setAdapterTensors: tensors");
    auto s = live(info.Env());
    return runner->run(info.Env(), "setAdapterTensors", Value(), [s, name, tensors]() -> JsResult {
      s->adapters().set_tensors(name, tensors);
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  // visionCached(key): whether the vision features of that key are cached (then prepare() needs no pixels for it).
  Napi::Value VisionCached(const Napi::CallbackInfo& info) {
    const std::string key = require_string(info[0], "visionCached: key");
    return Napi::Boolean::New(info.Env(), live(info.Env())->vision_cache().contains(key));
  }

  Napi::Value VisionCacheStats(const Napi::CallbackInfo& info) {
    VisionCache& cache = live(info.Env())->vision_cache();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("entries", Napi::Number::New(info.Env(), static_cast<double>(cache.entries())));
    o.Set("bytes", Napi::Number::New(info.Env(), static_cast<double>(cache.bytes())));
    return o;
  }

  // clearVisionCache(): Promise<void>, in order after the calls already made.
  Napi::Value ClearVisionCache(const Napi::CallbackInfo& info) {
    auto s = live(info.Env());
    return runner->run(info.Env(), "clearVisionCache", Value(), [s]() -> JsResult {
      s->vision_cache().clear();
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  // close(): Promise<void>. The model's memory is freed now rather than whenever the garbage collector finalizes
  // the object: the session is dropped on the worker after every worker call already made, and the allocator's cached
  // blocks go back to the device; later calls are refused. Posted, so that it runs even after an earlier posted call
  // failed (the promise then reports that failure). A prepare() still running holds the session until it ends: await
  // batches before closing. Batches and optimizers keep their own tensors until they are collected.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (session) {
      // moved, not copied: the worker's reset must drop the last reference, on the worker, before the cache is emptied
      runner->post("close", [s = std::move(session)]() mutable {
        const at::Device device = s->device();
        s.reset();
        release_cached_memory(device);
      });
    }
    return runner->run(info.Env(), "close", Value(), []() -> JsResult {
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  Napi::Value Gradients(const Napi::CallbackInfo& info) {
    std::string name = known_adapter(info[0], "gradients: name");
    auto s = live(info.Env());
    return runner->run(info.Env(), "gradients", Value(), [s, name]() -> JsResult {
      auto tensors = snapshot(s->adapters().gradients(name));
      return [tensors](Napi::Env env) -> Napi::Value { return to_named_tensors(env, tensors); };
    });
  }
};

// ---------------------------------------------------------------------------------------------------------------
// initProcessGroup(backend, rank, worldSize, masterAddr, masterPort, device, timeoutS): Promise<NativeProcessGroup>.
// The group has its own worker (rendezvous and its collectives block); optimizers call into it from model workers.
class GroupWrap : public Napi::ObjectWrap<GroupWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeProcessGroup",
                       {InstanceAccessor<&GroupWrap::Rank>("rank"), InstanceAccessor<&GroupWrap::WorldSize>("worldSize"),
                        InstanceMethod<&GroupWrap::AllReduce>("allReduce"), InstanceMethod<&GroupWrap::Barrier>("barrier"),
                        InstanceMethod<&GroupWrap::Close>("close")});
  }

  explicit GroupWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GroupWrap>(info) {
    require_internal(info, "NativeProcessGroup", "ProcessGroup.init()");
    // (a JS error only, as in ModelWrap's: a thread that cannot start)
    guarded(info.Env(), "ProcessGroup.init", [&] {
      runner = std::make_unique<AsyncRunner>(info.Env(), /*profiled=*/false);  // profiling counts a model's compute worker only
    });
  }

  static Napi::Value Init(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    GroupOptions o;
    o.backend = require_string(info[0], "ProcessGroup.init: backend");
    o.rank = static_cast<int>(require_integer(info[1], "ProcessGroup.init: rank"));
    o.world_size = static_cast<int>(require_integer(info[2], "ProcessGroup.init: worldSize"));
    o.master_addr = require_string(info[3], "ProcessGroup.init: masterAddr");
    o.master_port = static_cast<int>(require_integer(info[4], "ProcessGroup.init: masterPort"));
    o.device = require_string(info[5], "ProcessGroup.init: device");
    o.timeout_s = require_number(info[6], "ProcessGroup.init: timeoutS");
    Napi::Object object = addon(env).group_class.New({internal_token(env)});
    GroupWrap* wrap = Unwrap(object);
    wrap->options = o;
    return wrap->runner->run(env, "ProcessGroup.init(rank " + std::to_string(o.rank) + ")", object, [wrap, o]() -> JsResult {
      auto group = std::make_shared<ProcessGroup>(o);
      return [wrap, group](Napi::Env) -> Napi::Value {
        wrap->group = group;
        return wrap->Value();
      };
    });
  }

  std::unique_ptr<AsyncRunner> runner;
  std::shared_ptr<ProcessGroup> group;
  GroupOptions options;

 private:
  Napi::Value Rank(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), options.rank); }
  Napi::Value WorldSize(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), options.world_size); }

  Napi::Value AllReduce(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
      throw_type_error(env, "allReduce: data", "a Float32Array", info[0]);
    const int64_t n = static_cast<int64_t>(info[0].As<Napi::Float32Array>().ElementLength());
    at::Tensor data = tensor_from_float32(info[0], {n}, "allReduce: data");
    const std::string op_name = require_string(info[1], "allReduce: op");
    if (op_name != "sum" && op_name != "mean") throw_type_error(env, "allReduce: op", "\"sum\" or \"mean\"", info[1]);
    const ReduceOp op = op_name == "sum" ? ReduceOp::Sum : ReduceOp::Mean;
    auto g = group;
    const bool cuda = options.device != "cpu";
    const std::string device = options.device;
    return runner->run(env, "allReduce", Value(), [g, data, op, cuda, device]() mutable -> JsResult {
      if (cuda) data = data.to(at::Device(device));
      g->all_reduce(data, op);
      at::Tensor out = data.cpu();
      return [out](Napi::Env env) -> Napi::Value { return to_float32_array(env, out); };
    });
  }

  Napi::Value Barrier(const Napi::CallbackInfo& info) {
    auto g = group;
    return runner->run(info.Env(), "barrier", Value(), [g]() -> JsResult {
      g->barrier();
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    auto g = group;
    return runner->run(info.Env(), "close", Value(), [g]() -> JsResult {
      g->close();
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }
};

// ---------------------------------------------------------------------------------------------------------------
// new NativeOptimizer(model, adapter, lr, beta1, beta2, eps, weightDecay, group | null). AdamW is built on the worker
// at first use from the adapter's live tensors; with a group, step() averages the gradients over the ranks first.
class OptimizerWrap : public Napi::ObjectWrap<OptimizerWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeOptimizer",
                       {InstanceMethod<&OptimizerWrap::Step>("step"), InstanceMethod<&OptimizerWrap::Save>("save"),
                        InstanceMethod<&OptimizerWrap::SaveWithAdapter>("saveWithAdapter"),
                        InstanceMethod<&OptimizerWrap::Load>("load")});
  }

  explicit OptimizerWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<OptimizerWrap>(info) {
    Napi::Env env = info.Env();
    if (!info[0].IsObject() || !info[0].As<Napi::Object>().InstanceOf(addon(env).model_class.Value()))
      throw_type_error(env, "Optimizer: model", "a Model", info[0]);
    model_ = ModelWrap::Unwrap(info[0].As<Napi::Object>());
    model_->live(env);  // a closed model has no adapter to optimize
    model_ref_ = Napi::Persistent(info[0].As<Napi::Object>());
    state_ = std::make_shared<State>();
    state_->adapter = require_string(info[1], "Optimizer: adapter");
    if (!model_->names.count(state_->adapter))
      throw_type_error(env, "Optimizer: adapter", "the name of an adapter of this model", info[1]);
    AdamWOptions& o = state_->options;
    o.lr = require_number(info[2], "Optimizer: opts.lr");
    o.beta1 = require_number(info[3], "Optimizer: opts.betas[0]");
    o.beta2 = require_number(info[4], "Optimizer: opts.betas[1]");
    o.eps = require_number(info[5], "Optimizer: opts.eps");
    o.weight_decay = require_number(info[6], "Optimizer: opts.weightDecay");
    if (!is_missing(info[7])) {
      if (!info[7].IsObject() || !info[7].As<Napi::Object>().InstanceOf(addon(env).group_class.Value()))
        throw_type_error(env, "Optimizer: opts.group", "a ProcessGroup", info[7]);
      group_ref_ = Napi::Persistent(info[7].As<Napi::Object>());
      state_->group = GroupWrap::Unwrap(info[7].As<Napi::Object>())->group;
    }
  }

 private:
  struct State {
    std::string adapter;
    AdamWOptions options;
    std::unique_ptr<AdamW> adamw;
    std::shared_ptr<ProcessGroup> group;
    AdamW::Reducer reducer() {
      if (!group) return nullptr;
      auto g = group;
      return [g](at::Tensor& flat) { g->all_reduce(flat, ReduceOp::Mean); };
    }
    AdamW& get(ModelSession& s) {
      if (!adamw) {
        std::vector<std::string> keys;
        for (const auto& [key, t] : s.adapters().tensors(adapter)) keys.push_back(key);
        adamw = std::make_unique<AdamW>(keys, s.adapters().parameters(adapter), options);
      }
      return *adamw;
    }
  };
  Napi::ObjectReference model_ref_;  // keeps the model (and its worker) alive as long as this optimizer
  Napi::ObjectReference group_ref_;
  ModelWrap* model_ = nullptr;
  std::shared_ptr<State> state_;

  Napi::Value Step(const Napi::CallbackInfo& info) {
    Napi::Object o = require_object(info[0], "optimizer.step: opts");
    const double lr = require_number(member(o, "lr"), "optimizer.step: opts.lr");
    const double max_norm = is_missing(member(o, "maxGradNorm")) ? 0.0 : require_number(member(o, "maxGradNorm"), "optimizer.step: opts.maxGradNorm");
    auto s = model_->live(info.Env());
    auto state = state_;
    return model_->runner->run(info.Env(), "optimizer.step", Value(), [s, state, lr, max_norm]() -> JsResult {
      const double norm = state->get(*s).step(lr, max_norm, state->reducer());
      return [norm](Napi::Env env) -> Napi::Value {
        Napi::Object r = Napi::Object::New(env);
        r.Set("gradNorm", Napi::Number::New(env, norm));
        return r;
      };
    });
  }

  Napi::Value Save(const Napi::CallbackInfo& info) {
    const std::string path = require_string(info[0], "optimizer.save: path");
    auto s = model_->live(info.Env());
    auto state = state_;
    return model_->runner->run(info.Env(), "optimizer.save('" + path + "')", Value(), [s, state, path]() -> JsResult {
      state->get(*s).save(path);
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  // saveWithAdapter(dir, file): the adapter this optimizer trains (PEFT layout) and its state as dir/file, one
  // directory: both copied to the host on the worker, then written at once (lora/peft_files.h).
  Napi::Value SaveWithAdapter(const Napi::CallbackInfo& info) {
    const std::string dir = require_string(info[0], "optimizer.saveWithAdapter: dir");
    const std::string file = require_string(info[1], "optimizer.saveWithAdapter: file");
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      throw_type_error(info.Env(), "optimizer.saveWithAdapter: file", "a file name without '/'", info[1]);
    auto s = model_->live(info.Env());
    auto state = state_;
    return model_->runner->run(info.Env(), "optimizer.saveWithAdapter('" + dir + "')", Value(), [s, state, dir, file]() -> JsResult {
      const AdamW::HostState optimizer = state->get(*s).host_state();
      s->save_adapter(state->adapter, dir, {[&optimizer, &file](const std::string& into) { optimizer.write(into + "/" + file); }});
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }

  Napi::Value Load(const Napi::CallbackInfo& info) {
    const std::string path = require_string(info[0], "optimizer.load: path");
    auto s = model_->live(info.Env());
    auto state = state_;
    return model_->runner->run(info.Env(), "optimizer.load('" + path + "')", Value(), [s, state, path]() -> JsResult {
      state->get(*s).load(path);
      return [](Napi::Env env) -> Napi::Value { return env.Undefined(); };
    });
  }
};

// ---------------------------------------------------------------------------------------------------------------
// preprocessImage(rgb: Uint8Array, width, height, opts) -> Promise<{ pixelValues: Float32Array, grid: [t, gh, gw] }>.
// The arguments, options and target size are checked on the JS thread (bad ones throw there); the resize,
// normalisation and patchify run on libuv's thread pool: ~1.8M floats a 640x480 frame, milliseconds of CPU that the
// JS thread (collating the rest of a batch) need not spend. The result's Float32Array is the tensor's own memory
// (an external ArrayBuffer that keeps the tensor), neither zero-filled nor copied. rgb must not be written until
// the promise settles.
class PreprocessWork : public Napi::AsyncWorker {
 public:
  PreprocessWork(Napi::Env env, Napi::Uint8Array rgb, const ImageProcessorOptions& options, const ImagePlan& plan)
      : Napi::AsyncWorker(env, "rlloop:preprocessImage"),
        deferred_(Napi::Promise::Deferred::New(env)),
        options_(options),
        plan_(plan),
        rgb_data_(rgb.Data()) {
    rgb_ = Napi::Persistent(rgb);  // alive until the work is done
  }
  Napi::Promise promise() const { return deferred_.Promise(); }

  void Execute() override {
    try {
      pixels_ = at::empty({plan_.patches, plan_.patch_dim}, at::kFloat);
      preprocess_image_into(rgb_data_, options_, plan_, pixels_.data_ptr<float>());
    } catch (...) {
      describe_exception(std::current_exception(), error_, code_);
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (!error_.empty()) {
      Napi::Error error = Napi::Error::New(env, "preprocessImage: " + error_);
      error.Set("code", Napi::String::New(env, code_));
      deferred_.Reject(error.Value());
      return;
    }
    auto owner = std::make_unique<at::Tensor>(pixels_);
    const size_t count = static_cast<size_t>(pixels_.numel());
    Napi::ArrayBuffer bytes = Napi::ArrayBuffer::New(env, pixels_.data_ptr(), count * sizeof(float),
                                                     [](Napi::Env, void*, at::Tensor* tensor) { std::unique_ptr<at::Tensor> drop(tensor); },
                                                     owner.get());
    owner.release();  // the ArrayBuffer's finalizer owns it now
    Napi::Object result = Napi::Object::New(env);
    result.Set("pixelValues", Napi::Float32Array::New(env, count, bytes, 0));
    result.Set("grid", to_shape_array(env, at::IntArrayRef(plan_.grid.data(), 3)));
    deferred_.Resolve(result);
  }

 private:
  Napi::Promise::Deferred deferred_;
  ImageProcessorOptions options_;
  ImagePlan plan_;
  const uint8_t* rgb_data_;
  Napi::Reference<Napi::Uint8Array> rgb_;
  at::Tensor pixels_;
  std::string error_, code_;
};

Napi::Value PreprocessImage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    throw_type_error(env, "preprocessImage: rgb", "a Uint8Array", info[0]);
  auto rgb = info[0].As<Napi::Uint8Array>();
  const int64_t width = require_integer(info[1], "preprocessImage: width");
  const int64_t height = require_integer(info[2], "preprocessImage: height");
  if (width <= 0 || height <= 0) throw_type_error(env, "preprocessImage: width/height", "positive", info[1]);
  if (static_cast<int64_t>(rgb.ElementLength()) != width * height * 3)
    throw_type_error(env, "preprocessImage: rgb", "width*height*3 = " + std::to_string(width * height * 3) + " bytes",
                     Napi::Number::New(env, static_cast<double>(rgb.ElementLength())));
  ImageProcessorOptions options;
  if (!is_missing(info[3])) {
    Napi::Object o = require_object(info[3], "preprocessImage: opts");
    auto integer = [&](const char* key, int64_t& out) {
      if (!is_missing(member(o, key))) out = require_integer(member(o, key), std::string("preprocessImage: opts.") + key);
    };
    integer("patchSize", options.patch_size);
    integer("temporalPatchSize", options.temporal_patch_size);
    integer("mergeSize", options.merge_size);
    integer("minPixels", options.min_pixels);
    integer("maxPixels", options.max_pixels);
    auto triple = [&](const char* key, std::array<double, 3>& out) {
      Napi::Value v = member(o, key);
      if (is_missing(v)) return;
      if (!v.IsArray() || v.As<Napi::Array>().Length() != 3)
        throw_type_error(env, std::string("preprocessImage: opts.") + key, "[r, g, b]", v);
      for (uint32_t i = 0; i < 3; ++i) out[i] = require_number(v.As<Napi::Array>().Get(i), std::string("preprocessImage: opts.") + key);
    };
    triple("mean", options.mean);
    triple("std", options.std);
  }
  return guarded(env, "preprocessImage", [&]() -> Napi::Value {
    const ImagePlan plan = plan_image(width, height, options);
    auto* work = new PreprocessWork(env, rgb, options, plan);  // Node-API's idiom: deleted by itself once settled
    Napi::Promise promise = work->promise();
    work->Queue();
    return promise;
  });
}

// deviceMemoryStats(device) -> { allocatedBytes, peakAllocatedBytes, reservedBytes } (zeros on the CPU).
Napi::Value DeviceMemoryStatsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, "deviceMemoryStats", [&]() -> Napi::Value {
    const DeviceMemoryStats stats = device_memory_stats(parse_device(info[0].As<Napi::String>().Utf8Value()));
    Napi::Object out = Napi::Object::New(env);
    out.Set("allocatedBytes", Napi::Number::New(env, static_cast<double>(stats.allocated_bytes)));
    out.Set("peakAllocatedBytes", Napi::Number::New(env, static_cast<double>(stats.peak_allocated_bytes)));
    out.Set("reservedBytes", Napi::Number::New(env, static_cast<double>(stats.reserved_bytes)));
    return out;
  });
}

Napi::Value ResetPeakMemoryStatsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, "resetPeakMemoryStats", [&]() -> Napi::Value {
    reset_peak_memory_stats(parse_device(info[0].As<Napi::String>().Utf8Value()));
    return env.Undefined();
  });
}

// deltaRuleCheck({sequences, length, dim, seed, device, tf32, repeats}) -> the two delta-rule implementations
// against a float64 reference, the NaNs the kernels lost, and their timings (delta_rule/check.h). Synchronous: a
// diagnostic.
Napi::Value DeltaRuleCheckJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  DeltaRuleCheckOptions options;
  if (!is_missing(info[0])) {
    Napi::Object o = require_object(info[0], "deltaRuleCheck: options");
    auto integer = [&](const char* key, int64_t& out) {
      if (!is_missing(member(o, key))) out = require_integer(member(o, key), std::string("deltaRuleCheck: options.") + key);
    };
    int64_t seed = 0;
    integer("sequences", options.sequences);
    integer("length", options.length);
    integer("dim", options.dim);
    integer("seed", seed);
    integer("repeats", options.repeats);
    options.seed = static_cast<uint64_t>(seed);
    if (!is_missing(member(o, "device"))) options.device = parse_device(require_string(member(o, "device"), "deltaRuleCheck: options.device"));
    if (!is_missing(member(o, "tf32"))) options.tf32 = member(o, "tf32").ToBoolean().Value();
  }
  return guarded(env, "deltaRuleCheck", [&]() -> Napi::Value {
    const DeltaRuleCheck r = check_delta_rule(options);
    const auto errors = [&](const DeltaRuleErrors& e) {
      Napi::Object grads = Napi::Object::New(env);
      const char* names[5] = {"q", "k", "v", "beta", "g"};
      for (int i = 0; i < 5; ++i) grads.Set(names[i], e.grads[i]);
      Napi::Object out = Napi::Object::New(env);
      out.Set("output", e.output);
      out.Set("grads", grads);
      return out;
    };
    const auto timing = [&](const DeltaRuleTiming& t) {
      Napi::Object out = Napi::Object::New(env);
      out.Set("forwardMs", t.forward_ms);
      out.Set("trainingMs", t.training_ms);
      return out;
    };
    Napi::Object out = Napi::Object::New(env);
    out.Set("kernels", errors(r.kernels));
    out.Set("chunks", errors(r.chunks));
    out.Set("kernelsTime", timing(r.kernels_time));
    out.Set("chunksTime", timing(r.chunks_time));
    out.Set("kernelsApply", r.kernels_apply);
    Napi::Array lost = Napi::Array::New(env, r.nan_lost.size());
    for (size_t i = 0; i < r.nan_lost.size(); ++i) lost.Set(static_cast<uint32_t>(i), r.nan_lost[i]);
    out.Set("nanLost", lost);
    return out;
  });
}

Napi::Value InitProcessGroup(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), "ProcessGroup.init", [&] { return GroupWrap::Init(info); });
}

Napi::Value LoadModel(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), "Model.load", [&] { return ModelWrap::Load(info); });
}

}  // namespace

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  // fp32 must mean fp32 until a CUDA model claims otherwise (runtime/cuda_math.h): TF32 in cuBLAS/cuDNN makes fp32
  // logits differ from transformers' by ~1e-2 (qwen35.md §17).
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  auto* data = new AddonData();  // owned by the environment (freed by the SetInstanceData finalizer)
  env.SetInstanceData(data);
  Napi::Function model_class = ModelWrap::Define(env);
  Napi::Function batch_class = BatchWrap::Define(env);
  Napi::Function optimizer_class = OptimizerWrap::Define(env);
  Napi::Function group_class = GroupWrap::Define(env);
  data->model_class = Napi::Persistent(model_class);
  data->batch_class = Napi::Persistent(batch_class);
  data->optimizer_class = Napi::Persistent(optimizer_class);
  data->group_class = Napi::Persistent(group_class);
  exports.Set("NativeModel", model_class);
  exports.Set("NativeBatch", batch_class);
  exports.Set("NativeOptimizer", optimizer_class);
  exports.Set("NativeProcessGroup", group_class);
  exports.Set("loadModel", Napi::Function::New(env, LoadModel, "loadModel"));
  exports.Set("initProcessGroup", Napi::Function::New(env, InitProcessGroup, "initProcessGroup"));
  exports.Set("preprocessImage", Napi::Function::New(env, PreprocessImage, "preprocessImage"));
  exports.Set("deviceMemoryStats", Napi::Function::New(env, DeviceMemoryStatsJs, "deviceMemoryStats"));
  exports.Set("resetPeakMemoryStats", Napi::Function::New(env, ResetPeakMemoryStatsJs, "resetPeakMemoryStats"));
  exports.Set("deltaRuleCheck", Napi::Function::New(env, DeltaRuleCheckJs, "deltaRuleCheck"));
  return exports;
}

}  // namespace rlloop

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return rlloop::Init(env, exports); }
NODE_API_MODULE(rlloop_native, InitAddon)
