// PEFT's on-disk LoRA layout, which vLLM loads: adapter_config.json + adapter_model.safetensors (float32 tensors,
// keys base_model.model.<module path>.lora_A.weight / .lora_B.weight).
#pragma once
#include <string>

#include "adapters.h"

namespace rlloop {

// Writes into `dir`. A new directory is written as `dir.tmp-*`, fsync'd and renamed into place; into an existing
// directory (which may hold the trainer's other files) each file is written to a temporary name and renamed.
void save_peft_adapter(const AdapterSet& adapters, const std::string& name, const std::string& dir,
                       const std::string& base_model_name_or_path);

// Reads `dir` and attaches the adapter as `name`. Unsupported PEFT options (DoRA, biases, modules_to_save, rank or
// alpha patterns) and tensors that do not fit the model are errors naming the field or key.
void load_peft_adapter(AdapterSet& adapters, const std::string& name, const std::string& dir, at::Device device);

}  // namespace rlloop
