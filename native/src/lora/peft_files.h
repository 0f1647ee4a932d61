// PEFT's on-disk LoRA layout, which vLLM loads: adapter_config.json + adapter_model.safetensors (float32 tensors,
// keys base_model.model.<module path>.lora_A.weight / .lora_B.weight).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "lora/adapters.h"

namespace rlloop {

// Writes into `dir`. A new directory is written as `dir.tmp-*`, fsync'd and renamed into place; into an existing
// directory (which may hold the trainer's other files) each file is written to a temporary name and renamed.
// `beside` write more files into the same directory (their argument), each on a thread of its own while the
// adapter's weights are written, so a new directory appears with all of them (a round's adapter and its optimizer
// state). They run off the calling thread: give them host data, not tensors on a device.
using DirectoryWriter = std::function<void(const std::string& dir)>;
void save_peft_adapter(const AdapterSet& adapters, const std::string& name, const std::string& dir,
                       const std::string& base_model_name_or_path, const std::vector<DirectoryWriter>& beside = {});

// Reads `dir` and attaches the adapter as `name`. Unsupported PEFT options (DoRA, biases, modules_to_save, rank or
// alpha patterns) and tensors that do not fit the model are errors naming the field or key.
void load_peft_adapter(AdapterSet& adapters, const std::string& name, const std::string& dir, at::Device device);

}  // namespace rlloop
