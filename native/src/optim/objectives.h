// Training objectives on the per-token log-probs of the scored tokens (logp [B, K] float32, differentiable).
// The seed trainer's losses (seed/README.md): SFT cross-entropy and sequence-level clipped PPO with a k3 KL to a
// reference adapter.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

struct SftObjective {
  double scale = 1.0;  // loss = scale · mean over rows and the K scored tokens of −logp
};

struct PpoObjective {
  int64_t n = 0;      // code tokens: the first n scored tokens
  // Undefined: the step is on-policy (the policy has not been updated since the round's old log-probs were due),
  // so the old (or reference) log-probs are this forward's own, detached — ratio 1, kl 0, the same gradients.
  at::Tensor old;     // [B] Σ old logp of the code tokens, or undefined
  at::Tensor ref;     // [B, n] reference adapter's logp, or undefined
  at::Tensor adv;     // [B]
  at::Tensor weight;  // [B] per-row importance weight, or undefined (= 1)
  double clip = 0.2, beta = 0.02, scale = 1.0;
};

struct ObjectiveResult {
  at::Tensor loss;             // scalar, scaled
  at::Tensor pg, kl, ratio;    // [B] each (PPO only)
};

ObjectiveResult sft_objective(const at::Tensor& logp, const SftObjective& objective);
// Per row: ratio = exp(Σ_n lp − old); pg = −min(ratio·A, clip(ratio, 1−clip, 1+clip)·A);
// kl = Σ_n exp(ref − lp) − (ref − lp) − 1; loss = scale · mean(weight · (pg + beta·kl)).
ObjectiveResult ppo_objective(const at::Tensor& logp, const PpoObjective& objective);

}  // namespace rlloop
