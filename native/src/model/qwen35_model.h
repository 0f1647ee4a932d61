// Qwen3_5ForConditionalGeneration for training LoRA adapters: token embedding with the vision tower's features
// scattered into the <|image_pad|> rows, the hybrid decoder stack, final norm, and lm_head evaluated only at the
// scored positions. The base weights are frozen; only LoRA masters (lora/linear.h) ever require grad.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/decoder_layer.h"
#include "model/rope.h"
#include "runtime/batch.h"
#include "runtime/cuda_math.h"
#include "vision/feature_cache.h"
#include "vision/tower.h"

namespace rlloop {

enum class Checkpointing { On, Off, Auto };
enum class Tf32 { Auto, On, Off };
enum class Attention { Flash, Cudnn };

// How a model runs, chosen by the caller at load (runtime/session.h LoadOptions; docs/native-api.md).
struct ModelOptions {
  Checkpointing checkpointing = Checkpointing::Auto;
  int64_t vision_cache_bytes = int64_t{4} << 30;  // VisionCache budget; 0 disables it
  // TF32 for the float32 matrix products on CUDA (those of the delta rule's chunks): auto = on for a bfloat16 model,
  // whose error it does not change measurably (bench/RESULTS.md: max log-prob error 0.148 vs 0.136 against
  // float32, the backward 22% faster), off for a float32 one.
  Tf32 tf32 = Tf32::Auto;
  // Attention through PyTorch's own flash / memory-efficient kernels, not cuDNN's: cuDNN builds an execution plan
  // (and compiles its kernel) at the first call of each attention configuration and shape. Measured on an H200 at
  // the 9B shapes: a process's first training backward took 1.79 s against 0.41 s steady, 1.3 s of it in the 8
  // full-attention layers, and a PPO round's first step 3.2 s against 0.69 s. Cudnn is kept to compare.
  Attention attention = Attention::Flash;
  // A stand-in instead of the checkpoint: the config's shapes with one decoder layer of each kind and one vision
  // block (Qwen35Config::stand_in), its weights zeros made on the device (io/zero_weights.h), nothing
  // read but config.json. It runs the real model's kernels at the real shapes, so a process pays their first-use
  // costs on it while the real weights load (src/train/warm-up.ts).
  bool stand_in = false;
};

struct ForwardOptions {
  const std::string* adapter = nullptr;        // LoRA adapter to apply (null: base model)
  bool record_hidden_states = false;           // fill ForwardOutput::hidden_states (inspection; no grad)
};

struct ForwardOutput {
  at::Tensor logits;                       // [B, K, vocab] in the model dtype, at the scored positions
  std::vector<at::Tensor> hidden_states;   // numLayers + 1 entries [B, L, hidden] when recorded
  size_t recomputed_layers = 0;            // layers whose forward the backward repeats (gradient checkpointing)
};

class Qwen35Model {
 public:
  Qwen35Model(const std::string& dir, at::ScalarType dtype, at::Device device, const ModelOptions& options);

  uint64_t id() const { return id_; }  // unique in the process: the owner of the batches it prepares
  const Qwen35Config& config() const { return config_; }
  at::ScalarType dtype() const { return dtype_; }
  at::Device device() const { return device_; }
  Checkpointing checkpointing() const { return checkpointing_; }

  // Every LoRA-capable Linear of the language model, in layer order.
  std::vector<LoraLinear*> lora_linears();

  // Runs with autograd when grad mode is on and the adapter has trainable tensors (then per-layer checkpointing
  // applies as configured).
  ForwardOutput forward(PreparedBatch& batch, const ForwardOptions& options);

  // The frozen tower's output for the batch's images ([sum image tokens, hidden]): cached images' features from
  // the vision cache, the tower run once on the rest (whose keyed features are then cached); kept in the batch.
  const at::Tensor& vision_features(PreparedBatch& batch);

  VisionCache& vision_cache() { return vision_cache_; }

 private:
  // Binds batches to the model that prepared them: an id, not the model's address, which a model loaded after
  // this one is closed may reuse.
  uint64_t id_;
  Qwen35Config config_;
  at::ScalarType dtype_;
  at::Device device_;
  int64_t device_memory_bytes_ = 0;  // the accelerator's total memory (0 on the CPU), for "auto" checkpointing
  Checkpointing checkpointing_;
  std::optional<CudaMathClaim> cuda_math_;  // held for the model's life on CUDA (runtime/cuda_math.h)
  at::Tensor embed_tokens_;  // [vocab, hidden]
  std::vector<std::unique_ptr<DecoderLayer>> layers_;
  at::Tensor final_norm_;    // [hidden]
  at::Tensor lm_head_;       // [vocab, hidden]
  std::unique_ptr<TextRotary> rotary_;
  std::unique_ptr<VisionTower> vision_;
  VisionCache vision_cache_;

  at::Tensor embed(PreparedBatch& batch);
  // How many leading decoder layers recompute their forward in backward (Checkpointing: on = all, off = none,
  // auto = as many as needed to keep the peak under 76 GiB on an accelerator; none on the CPU).
  size_t checkpointed_layers(const PreparedBatch& batch) const;
  std::vector<at::Tensor> trainable_tensors(size_t layer, const std::string* adapter);
};

}  // namespace rlloop
