// The model's LoRA adapters, by name: creation (fresh PEFT init), attaching loaded tensors, which one is trainable,
// and the PEFT key view (`base_model.model.<module path>.lora_A.weight` [r, in] / `.lora_B.weight` [out, r]).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "lora/linear.h"

namespace rlloop {

struct LoraSpec {
  int64_t r = 16;
  double alpha = 32;
  std::string target_modules;  // regex, Python re.fullmatch semantics on module paths
  std::vector<std::string> target_list;  // alternatively PEFT's list form (suffix match); used when non-empty
  int64_t seed = 0;
  bool use_rslora = false;
  double scale() const;
};

struct AdapterRecord {
  std::string name;
  LoraSpec spec;
  std::vector<LoraLinear*> modules;  // the modules carrying this adapter, in model order
};

std::string peft_key(const std::string& module_path, bool lora_a);

// Indices of the module paths that the spec's targets select (regex fullmatch, or PEFT's list form: equal or ending
// with "." + target). Throws for an invalid regex or when nothing matches. Pure: usable from any thread.
std::vector<size_t> matching_modules(const std::vector<std::string>& paths, const LoraSpec& spec);

class AdapterSet {
 public:
  explicit AdapterSet(std::vector<LoraLinear*> linears) : linears_(std::move(linears)) {}

  // Module paths the spec's targets select (regex fullmatch or list suffix match); throws if none.
  std::vector<LoraLinear*> select(const LoraSpec& spec) const;
  // Fresh adapter: A ~ U(±1/sqrt(in)) (kaiming_uniform a=√5) from a CPU generator seeded with spec.seed, B = 0.
  void add(const std::string& name, const LoraSpec& spec, at::Device device);
  // Adapter from PEFT-keyed tensors (float32 after conversion); keys decide the modules, as in vLLM. The tensors are
  // taken, not copied, where they are float32 on `device` already: the caller must not keep using them.
  void attach(const std::string& name, const LoraSpec& spec, const std::map<std::string, at::Tensor>& tensors,
              const std::string& source, at::Device device);

  // Detaches and frees the adapter (an optimizer still holding its tensors keeps only those alive).
  void remove(const std::string& name);

  bool has(const std::string& name) const { return records_.count(name) > 0; }
  const AdapterRecord& record(const std::string& name) const;
  std::vector<std::string> names() const;
  void set_trainable(const std::string* name);  // requires_grad on that adapter only (null: none)
  const std::string* trainable() const { return trainable_.empty() ? nullptr : &trainable_; }

  // PEFT key -> tensor (the masters themselves: callers must not keep them past the next mutation)
  NamedTensorList tensors(const std::string& name) const;
  NamedTensorList gradients(const std::string& name) const;  // zeros where no gradient was accumulated
  void set_tensors(const std::string& name, const std::map<std::string, at::Tensor>& values);
  // Parameters in key order (A then B per module), matching tensors() / gradients().
  std::vector<at::Tensor> parameters(const std::string& name) const;

 private:
  std::vector<LoraLinear*> linears_;
  std::map<std::string, AdapterRecord> records_;
  std::string trainable_;

  void check_name(const std::string& name) const;
};

}  // namespace rlloop
