// ModelSession: everything one loaded model does, in plain C++ types (js/binding.cpp only converts to and from JS).
// All methods run on the model's worker thread, one at a time.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lora/adapters.h"
#include "lora/peft_files.h"
#include "model/qwen35_model.h"
#include "optim/adamw.h"
#include "optim/objectives.h"
#include "runtime/batch.h"

namespace rlloop {

struct LoadOptions {
  std::string device = "cpu";
  std::string dtype = "float32";
  ModelOptions model;
};

struct LogprobsResult {
  at::Tensor logp;     // [B, K] float32 CPU
  at::Tensor correct;  // [B, K] uint8 CPU: argmax == target
};

using Objective = std::variant<SftObjective, PpoObjective>;

struct BackwardResult {
  double loss = 0;
  at::Tensor logp;            // [B, K] float32 CPU
  at::Tensor pg, kl, ratio;   // [B] float32 CPU (PPO)
  int64_t recomputed_layers = 0;  // of the forward: how many layers the backward recomputed (checkpointing)
};

struct InspectResult {
  std::vector<at::Tensor> vision_features;  // per image [tokens, hidden] float32 CPU
  at::Tensor position_ids;                  // [3, B, L] int64 CPU
  std::vector<at::Tensor> hidden_states;    // numLayers + 1 × [B, L, hidden] float32 CPU
  at::Tensor logits;                        // [B, K, vocab] float32 CPU
};

// Parses "cpu" / "cuda:N" and checks that the device exists.
at::Device parse_device(const std::string& text);
at::ScalarType parse_dtype(const std::string& text);

class ModelSession {
 public:
  ModelSession(const std::string& dir, const LoadOptions& options);

  const Qwen35Config& config() const { return model_.config(); }
  const std::string& dir() const { return dir_; }
  at::Device device() const { return model_.device(); }
  at::ScalarType dtype() const { return model_.dtype(); }
  std::vector<std::string> module_paths();
  AdapterSet& adapters() { return adapters_; }
  uint64_t batch_owner() const { return model_.id(); }
  VisionCache& vision_cache() { return model_.vision_cache(); }  // batches record the model they were prepared for

  std::shared_ptr<PreparedBatch> prepare(const std::vector<RowInput>& rows);
  LogprobsResult logprobs(PreparedBatch& batch, const std::string* adapter);
  // Forward with autograd through the trainable adapter, objective, backward (grads accumulate).
  BackwardResult backward(PreparedBatch& batch, const Objective& objective);
  InspectResult inspect(PreparedBatch& batch, const std::string* adapter);

  // `beside`: more files for the adapter's directory (lora/peft_files.h), e.g. the optimizer state of the round.
  void save_adapter(const std::string& name, const std::string& dir, const std::vector<DirectoryWriter>& beside = {});
  void load_adapter(const std::string& name, const std::string& dir);

 private:
  std::string dir_;
  Qwen35Model model_;
  AdapterSet adapters_;
  std::optional<c10::Stream> upload_stream_;  // prepare()'s copies (runtime/device_upload.h); none on the CPU

  at::Tensor token_logprobs(const at::Tensor& logits, const PreparedBatch& batch) const;  // [B, K] float32
  const std::string* checked_adapter(const std::string* adapter) const;
};

}  // namespace rlloop
