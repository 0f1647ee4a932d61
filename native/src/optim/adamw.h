// AdamW with torch.optim.AdamW's semantics (the multi-tensor path): decoupled weight decay p *= 1 − lr·wd, moments
// m = lerp(m, g, 1 − β1), v = β2·v + (1 − β2)·g², bias corrections, p −= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps).
// Plus torch.nn.utils.clip_grad_norm_: total L2 norm over all grads, × min(1, max/(norm + 1e-6)).
// Parameters without a gradient are skipped (no decay, no state change), as torch does.
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <future>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace rlloop {

struct AdamWOptions {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

class AdamW {
 public:
  // keys name the params (PEFT keys) for save/load; params are the live float32 masters.
  AdamW(std::vector<std::string> keys, std::vector<at::Tensor> params, AdamWOptions options);

  // Averages the gradients through `all_reduce_mean` when given (one call on all of them flattened, in key order;
  // missing gradients count as zeros so every rank reduces the same layout), clips (max_grad_norm > 0), steps with
  // `lr`, sets grads to none. Returns the total grad norm before clipping.
  using Reducer = std::function<void(at::Tensor& flat)>;
  double step(double lr, double max_grad_norm, const Reducer& all_reduce_mean = nullptr);

  // optimizer.safetensors: "<key>.exp_avg", "<key>.exp_avg_sq" (float32); sidecar JSON next to it
  // (<path minus .safetensors>.json): {step, lr, betas, eps, weight_decay}.
  void save(const std::string& path) const;
  // save() in two steps: the state copied to the host on the calling thread (the model's worker, whose CUDA stream
  // produced it), then written from any thread.
  struct HostState {
    SafetensorsImage tensors;
    std::string sidecar;
    void write(const std::string& path) const;
  };
  HostState host_state() const;
  void load(const std::string& path);

  int64_t steps() const { return step_; }

 private:
  std::vector<std::string> keys_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // allocated lazily (zeros) on the first step
  AdamWOptions options_;
  int64_t step_ = 0;
  // On a CUDA device: the page-locked buffers of the saves (this state, and the adapter of its params beside it)
  // pinned on a thread of their own while the training runs (io/safetensors.h reserve_host_copies; registered
  // pinning, runtime/pinned_memory.h, keeps the training's launches from waiting on the driver meanwhile); a save
  // waits for it first.
  std::future<void> host_reserved_;

  void ensure_state();
};

std::string optimizer_sidecar_path(const std::string& safetensors_path);

}  // namespace rlloop
