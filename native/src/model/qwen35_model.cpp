#include "model/qwen35_model.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <atomic>

#include "base/check.h"
#include "delta_rule/aten.h"
#include "diagnostics/device_memory.h"
#include "diagnostics/profiler.h"
#include "diagnostics/switches.h"
#include "io/weights.h"
#include "io/zero_weights.h"
#include "model/grad_checkpoint.h"
#include "model/rms_norm.h"
#include "runtime/pinned_memory.h"

namespace rlloop {

namespace {
std::atomic<uint64_t> next_model_id{1};
}  // namespace

Qwen35Model::Qwen35Model(const std::string& dir, at::ScalarType dtype, at::Device device, const ModelOptions& options)
    : id_(next_model_id++),
      config_(options.stand_in ? Qwen35Config::load(dir).stand_in() : Qwen35Config::load(dir)),
      dtype_(dtype),
      device_(device),
      checkpointing_(options.checkpointing),
      vision_cache_(options.vision_cache_bytes) {
  c10::NoGradGuard no_grad;
  if (device.is_cuda()) {
    configure_pinned_memory();  // before anything is pinned (uploads, saves)
    const bool tf32 = options.tf32 == Tf32::Auto ? dtype == at::kBFloat16 : options.tf32 == Tf32::On;
    cuda_math_.emplace(CudaMath{tf32, options.attention == Attention::Cudnn});
  }
  std::unique_ptr<WeightSource> source;
  if (options.stand_in)
    source = std::make_unique<ZeroWeights>();
  else
    source = std::make_unique<CheckpointReader>(dir);
  WeightSource& reader = *source;
  const TextConfig& t = config_.text;
  WeightScope lm(reader, "model.language_model.", dtype, device);
  embed_tokens_ = lm.sub("embed_tokens").get("weight", {t.vocab_size, t.hidden_size});
  for (int64_t i = 0; i < t.num_hidden_layers; ++i)
    layers_.push_back(std::make_unique<DecoderLayer>(t, t.layer_types[i], lm.sub("layers").sub(std::to_string(i))));
  final_norm_ = lm.sub("norm").get("weight", {t.hidden_size});
  lm_head_ = WeightScope(reader, "lm_head.", dtype, device).get("weight", {t.vocab_size, t.hidden_size});
  rotary_ = std::make_unique<TextRotary>(t, device);
  if (config_.vision) {
    WeightScope visual(reader, "model.visual.", dtype, device);
    WeightGetter getter = [visual](const std::string& key, const std::vector<int64_t>& shape) {
      return visual.get(key, shape);
    };
    vision_ = std::make_unique<VisionTower>(*config_.vision, getter, dtype, device);
  }
  reader.check_all_used();
  device_memory_bytes_ = device_total_memory(device);
}

std::vector<LoraLinear*> Qwen35Model::lora_linears() {
  std::vector<LoraLinear*> out;
  for (auto& layer : layers_)
    for (LoraLinear* l : layer->linears()) out.push_back(l);
  return out;
}

const at::Tensor& Qwen35Model::vision_features(PreparedBatch& batch) {
  if (batch.vision_features.defined() || batch.grids.empty()) return batch.vision_features;
  RLLOOP_CHECK(vision_, Unsupported, "the batch has images but the model has no vision tower");
  c10::NoGradGuard no_grad;  // frozen tower: never differentiated
  ProfileRange range("vision");
  // The tower runs on the images whose features no earlier batch left in the cache, decided here on the worker,
  // where batches run in their submission order. The collator's and prepare()'s checks race with the forwards
  // before this one: an image sent with pixels may have been cached since, and it is then dropped from the tower's
  // input. So a frame's features come from the first batch that had it and the tower's input (on which one image's
  // result depends, through the shapes of its products) is a function of the order of the batches, not of timing
  // (a resident round equals the one-shot run bit for bit).
  const size_t n = batch.grids.size();
  std::vector<bool> from_cache(n);
  std::vector<at::Tensor> kept_pixels;
  std::vector<Grid> kept_grids;
  bool dropped = false;
  int64_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    if (batch.image_cached[i]) {
      from_cache[i] = true;
      continue;
    }
    const Grid& g = batch.grids[i];
    const int64_t patches = g[0] * g[1] * g[2];
    // (a cached entry of another size is not this image's: its pixels are used, as before the entry existed)
    const at::Tensor cached = batch.image_keys[i].empty() ? at::Tensor() : vision_cache_.get(batch.image_keys[i]);
    from_cache[i] = cached.defined() && cached.size(0) == batch.image_tokens[i];
    if (from_cache[i]) {
      dropped = true;
    } else {
      kept_pixels.push_back(batch.pixel_values.narrow(0, row, patches));
      kept_grids.push_back(g);
    }
    row += patches;
  }
  at::Tensor fresh;
  if (!kept_grids.empty())
    fresh = vision_->forward(dropped ? at::cat(kept_pixels, 0) : batch.pixel_values, kept_grids).to(dtype_);
  std::vector<at::Tensor> parts;
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string& key = batch.image_keys[i];
    if (from_cache[i]) {
      at::Tensor cached = vision_cache_.get(key);
      RLLOOP_CHECK(cached.defined(), Invalid,
                   "image " << i << " of the batch: its cached vision features (key \"" << key
                            << "\") were cleared after the batch was prepared; prepare it again");
      RLLOOP_CHECK(cached.size(0) == batch.image_tokens[i], Shape,
                   "image " << i << " of the batch: its cached vision features (key \"" << key << "\") hold "
                            << cached.size(0) << " tokens but its grid needs " << batch.image_tokens[i]
                            << " (one key was used for images of different sizes)");
      parts.push_back(cached);
      continue;
    }
    at::Tensor mine = fresh.narrow(0, offset, batch.image_tokens[i]);
    offset += batch.image_tokens[i];
    if (!key.empty()) vision_cache_.put(key, mine);
    parts.push_back(mine);
  }
  batch.vision_features = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  batch.pixel_values = at::Tensor();  // never read again: the features are kept on the batch
  return batch.vision_features;
}

at::Tensor Qwen35Model::embed(PreparedBatch& batch) {
  at::Tensor x = at::embedding(embed_tokens_, batch.input_ids);  // [B, L, hidden]
  if (batch.grids.empty()) return x;
  const at::Tensor& features = vision_features(batch);
  // Image rows in row-major order of [B, L] = the order of the images (rows first, then within a row).
  at::Tensor mask = (batch.input_ids == config_.image_token_id).unsqueeze(-1).expand_as(x);
  return x.masked_scatter(mask, features);
}

size_t Qwen35Model::checkpointed_layers(const PreparedBatch& batch) const {
  const size_t n = layers_.size();
  if (checkpointing_ != Checkpointing::Auto) return checkpointing_ == Checkpointing::On ? n : 0;
  if (device_.is_cpu()) return 0;
  // Auto on an accelerator: keep as many layers' saved activations as fit between what is allocated now (weights,
  // adapters, optimizer state, gradients, the batch) and the peak target, and recompute the rest (the first ones:
  // their activations would live longest). Target: 76 GiB (issue 5: under 80 GiB, with room for the allocator's
  // fragments), or the device's memory less 4 GiB on a smaller one. Per token and layer, a layer's saved
  // activations and the backward's transients at the peak come to h hidden-sized and 6 intermediate-sized vectors
  // in the model dtype, measured on one H200 at the 9B shapes with nothing recomputed (peak less what was
  // allocated before the steps, over 32 layers and the batch's padded tokens): with every kernel, 14.2-14.5 in four
  // runs (53.2-53.5 GiB at 16 rows of 423 tokens, the delta rule's U and W included; the range is whether the peak
  // came before the optimizer state existed: bench/RESULTS.md); the solve's inverse T, kept as well, adds 64 float32s
  // a token and value head in the 24 of 32 layers that have one, 0.75 more: used as 15.5; the configurations below are
  // diagnostics, measured on earlier code: without the delta-rule kernels 14 (52.1 GiB), without the norm kernels
  // 6 more (61.6 GiB, plus U, W and T's 3.75 when the delta-rule kernels run), autograd's delta-rule backward 34
  // (83.9 GiB). Apart from the layers, the head: about 14 bytes a scored logit (the logits in the model dtype,
  // their float32 log-softmax kept for the backward, its gradient), B·K·vocab of them.
  constexpr double kGiB = 1ull << 30;
  const double total = static_cast<double>(device_memory_bytes_);
  const double peak_target = std::min(76.0 * kGiB, total > 0 ? total - 4.0 * kGiB : 76.0 * kGiB);
  const TextConfig& t = config_.text;
  const double head = 14.0 * static_cast<double>(batch.B * batch.K) * static_cast<double>(t.vocab_size);
  const double budget = peak_target - static_cast<double>(device_memory_stats(device_).allocated_bytes) - head;
  const bool norm_kernels = cuda_kernel_enabled("norm"), delta_rule_kernels = cuda_kernel_enabled("delta_rule");
  const double hidden_vectors = !delta_rule_backward_is_manual()          ? 34.0
                                : norm_kernels && delta_rule_kernels      ? 15.5
                                : (norm_kernels ? 14.0 : 20.0) + (delta_rule_kernels ? 3.75 : 0.0);
  const double per_token_layer = (hidden_vectors * t.hidden_size + 6.0 * t.intermediate_size) * c10::elementSize(dtype_);
  const double per_layer = per_token_layer * static_cast<double>(batch.B * batch.L);
  if (per_layer <= 0) return 0;
  const size_t kept = budget <= 0 ? 0 : static_cast<size_t>(std::min(budget / per_layer, static_cast<double>(n)));
  return kept >= n ? 0 : n - kept;
}

std::vector<at::Tensor> Qwen35Model::trainable_tensors(size_t layer, const std::string* adapter) {
  std::vector<at::Tensor> out;
  if (!adapter) return out;
  for (LoraLinear* l : layers_[layer]->linears())
    if (const LoraWeights* w = l->find(*adapter)) {
      if (w->A.requires_grad()) out.push_back(w->A);
      if (w->B.requires_grad()) out.push_back(w->B);
    }
  return out;
}

ForwardOutput Qwen35Model::forward(PreparedBatch& batch, const ForwardOptions& options) {
  RLLOOP_CHECK(batch.owner == id_, Invalid, "the batch was prepared by another model");
  if (batch.upload) batch.upload->ready();  // prepared on another thread: its copies may still be in flight
  ForwardOutput out;
  LayerInputs in;
  in.rotary = rotary_->tables(batch.position_ids, dtype_);
  in.padding_mask = batch.padding_mask;
  in.adapter = options.adapter;

  at::Tensor x = embed(batch);
  if (options.record_hidden_states) out.hidden_states.push_back(x);
  const bool grad = c10::GradMode::is_enabled();
  const size_t checkpointed = grad ? checkpointed_layers(batch) : 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<at::Tensor> trainable = grad ? trainable_tensors(i, options.adapter) : std::vector<at::Tensor>{};
    const bool needs_graph = x.requires_grad() || !trainable.empty();
    const bool recompute = i < checkpointed && needs_graph;
    out.recomputed_layers += recompute ? 1 : 0;
    x = recompute ? checkpointed_layer_forward(*layers_[i], x, in, trainable) : layers_[i]->forward(x, in);
    // transformers' output_hidden_states: the last entry is after the final norm, not the raw last layer.
    if (options.record_hidden_states && i + 1 < layers_.size()) out.hidden_states.push_back(x);
  }
  if (options.record_hidden_states) out.hidden_states.push_back(zero_centred_rms_norm(x, final_norm_, config_.text.rms_norm_eps));

  ProfileRange head_range("lm_head");
  // Norm and lm_head only at the scored positions: gather [B, K, hidden] first (the norm is per position).
  const int64_t hidden = x.size(-1);
  at::Tensor index = batch.logit_positions.unsqueeze(-1).expand({batch.B, batch.K, hidden});
  at::Tensor scored = zero_centred_rms_norm(x.gather(1, index), final_norm_, config_.text.rms_norm_eps);
  out.logits = at::linear(scored, lm_head_);
  return out;
}

}  // namespace rlloop
