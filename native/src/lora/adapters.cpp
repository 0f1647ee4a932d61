#include "lora/adapters.h"

#include <c10/core/GradMode.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <regex>

#include "base/check.h"

namespace rlloop {

namespace {
const char* kPrefix = "base_model.model.";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// PEFT's list form: a module matches a target when its name equals it or ends with "." + target.
bool list_match(const std::string& path, const std::vector<std::string>& targets) {
  for (const std::string& t : targets)
    if (path == t || ends_with(path, "." + t)) return true;
  return false;
}
}  // namespace

double LoraSpec::scale() const { return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r); }

std::string peft_key(const std::string& module_path, bool lora_a) {
  return kPrefix + module_path + (lora_a ? ".lora_A.weight" : ".lora_B.weight");
}

std::vector<size_t> matching_modules(const std::vector<std::string>& paths, const LoraSpec& spec) {
  std::vector<size_t> out;
  if (!spec.target_list.empty()) {
    for (size_t i = 0; i < paths.size(); ++i)
      if (list_match(paths[i], spec.target_list)) out.push_back(i);
  } else {
    std::regex pattern;
    try {
      pattern = std::regex(spec.target_modules, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      RLLOOP_FAIL(Invalid, "targetModules is not a valid regular expression: '" << spec.target_modules << "' (" << e.what() << ")");
    }
    // std::regex_match requires the whole path to match: Python's re.fullmatch, which PEFT uses for a string.
    for (size_t i = 0; i < paths.size(); ++i)
      if (std::regex_match(paths[i], pattern)) out.push_back(i);
  }
  RLLOOP_CHECK(!out.empty(), Invalid,
               "targetModules '" << spec.target_modules << "' matches no language-model Linear (module paths look like '"
                                 << (paths.empty() ? std::string() : paths[0]) << "')");
  return out;
}

std::vector<LoraLinear*> AdapterSet::select(const LoraSpec& spec) const {
  std::vector<std::string> paths;
  for (LoraLinear* l : linears_) paths.push_back(l->path());
  std::vector<LoraLinear*> out;
  for (size_t i : matching_modules(paths, spec)) out.push_back(linears_[i]);
  return out;
}

void AdapterSet::check_name(const std::string& name) const {
  RLLOOP_CHECK(!name.empty(), Invalid, "adapter name must not be empty");
  RLLOOP_CHECK(!has(name), Invalid, "adapter '" << name << "' already exists");
}

void AdapterSet::add(const std::string& name, const LoraSpec& spec, at::Device device) {
  check_name(name);
  RLLOOP_CHECK(spec.r > 0, Invalid, "LoRA r must be positive, got " << spec.r);
  AdapterRecord rec{name, spec, select(spec)};
  c10::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(spec.seed));
  auto f32 = at::TensorOptions().dtype(at::kFloat);
  for (LoraLinear* l : rec.modules) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(l->in_features()));
    at::Tensor A = at::empty({spec.r, l->in_features()}, f32).uniform_(-bound, bound, gen).to(device);
    at::Tensor B = at::zeros({l->out_features(), spec.r}, f32.device(device));
    l->adapters()[name] = LoraWeights{A, B, spec.scale()};
  }
  records_[name] = std::move(rec);
}

void AdapterSet::attach(const std::string& name, const LoraSpec& spec, const std::map<std::string, at::Tensor>& tensors,
                        const std::string& source, at::Device device) {
  check_name(name);
  std::map<std::string, LoraLinear*> by_path;
  for (LoraLinear* l : linears_) by_path[l->path()] = l;
  std::map<LoraLinear*, LoraWeights> found;
  for (const auto& [key, tensor] : tensors) {
    const bool is_a = ends_with(key, ".lora_A.weight"), is_b = ends_with(key, ".lora_B.weight");
    RLLOOP_CHECK((is_a || is_b) && key.rfind(kPrefix, 0) == 0, Invalid,
                 source << ": tensor '" << key << "' is not a PEFT LoRA key (base_model.model.<module>.lora_A/B.weight)");
    const std::string path = key.substr(std::string(kPrefix).size(), key.size() - std::string(kPrefix).size() - 14);
    auto it = by_path.find(path);
    RLLOOP_CHECK(it != by_path.end(), Invalid,
                 source << ": tensor '" << key << "' targets module '" << path
                        << "', which is not a LoRA-capable Linear of this model (adapter for another model?)");
    LoraLinear* l = it->second;
    std::vector<int64_t> expected = is_a ? std::vector<int64_t>{spec.r, l->in_features()}
                                         : std::vector<int64_t>{l->out_features(), spec.r};
    RLLOOP_CHECK(tensor.sizes().vec() == expected, Shape,
                 source << ": tensor '" << key << "' has shape " << shape_string(tensor.sizes()) << ", expected "
                        << shape_string(expected) << " (r = " << spec.r << ")");
    // the caller's tensors become the masters (load_all's are fresh copies on the device already: no second copy)
    at::Tensor master = tensor.detach().to(device, at::kFloat);
    (is_a ? found[l].A : found[l].B) = master;
    found[l].scale = spec.scale();
  }
  RLLOOP_CHECK(!found.empty(), Invalid, source << ": no LoRA tensors");
  AdapterRecord rec{name, spec, {}};
  for (LoraLinear* l : linears_) {
    auto it = found.find(l);
    if (it == found.end()) continue;
    RLLOOP_CHECK(it->second.A.defined() && it->second.B.defined(), Invalid,
                 source << ": module '" << l->path() << "' has only one of lora_A / lora_B");
    rec.modules.push_back(l);
  }
  for (LoraLinear* l : rec.modules) l->adapters()[name] = found[l];
  records_[name] = std::move(rec);
}

void AdapterSet::remove(const std::string& name) {
  const AdapterRecord& rec = record(name);
  for (LoraLinear* l : rec.modules) l->adapters().erase(name);
  if (trainable_ == name) trainable_.clear();
  records_.erase(name);
}

const AdapterRecord& AdapterSet::record(const std::string& name) const {
  auto it = records_.find(name);
  RLLOOP_CHECK(it != records_.end(), NotFound, "no adapter named '" << name << "'");
  return it->second;
}

std::vector<std::string> AdapterSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, rec] : records_) out.push_back(name);
  return out;
}

void AdapterSet::set_trainable(const std::string* name) {
  if (name) record(*name);  // throws for an unknown name
  trainable_ = name ? *name : std::string();
  for (const auto& [adapter, rec] : records_) {
    const bool on = name && adapter == *name;
    for (LoraLinear* l : rec.modules) {
      LoraWeights& w = l->adapters().at(adapter);
      w.A.requires_grad_(on);
      w.B.requires_grad_(on);
    }
  }
}

NamedTensorList AdapterSet::tensors(const std::string& name) const {
  NamedTensorList out;
  for (LoraLinear* l : record(name).modules) {
    const LoraWeights& w = l->adapters().at(name);
    out.emplace_back(peft_key(l->path(), true), w.A.detach());
    out.emplace_back(peft_key(l->path(), false), w.B.detach());
  }
  return out;
}

std::vector<at::Tensor> AdapterSet::parameters(const std::string& name) const {
  std::vector<at::Tensor> out;
  for (LoraLinear* l : record(name).modules) {
    const LoraWeights& w = l->adapters().at(name);
    out.push_back(w.A);
    out.push_back(w.B);
  }
  return out;
}

NamedTensorList AdapterSet::gradients(const std::string& name) const {
  NamedTensorList out = tensors(name);
  std::vector<at::Tensor> params = parameters(name);
  for (size_t i = 0; i < out.size(); ++i) {
    const at::Tensor& g = params[i].grad();
    out[i].second = g.defined() ? g.detach() : at::zeros_like(params[i]);
  }
  return out;
}

void AdapterSet::set_tensors(const std::string& name, const std::map<std::string, at::Tensor>& values) {
  NamedTensorList current = tensors(name);
  std::map<std::string, at::Tensor> by_key(current.begin(), current.end());
  c10::NoGradGuard no_grad;
  for (const auto& [key, value] : values) {
    auto it = by_key.find(key);
    RLLOOP_CHECK(it != by_key.end(), Invalid, "adapter '" << name << "' has no tensor '" << key << "'");
    RLLOOP_CHECK(value.sizes() == it->second.sizes(), Shape,
                 "tensor '" << key << "' has shape " << shape_string(value.sizes()) << ", adapter '" << name
                            << "' expects " << shape_string(it->second.sizes()));
  }
  for (const auto& [key, value] : values) by_key[key].copy_(value);  // in place: optimizers keep these tensors
}

}  // namespace rlloop
