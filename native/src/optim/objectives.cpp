#include "optim/objectives.h"

#include "base/check.h"

namespace rlloop {

ObjectiveResult sft_objective(const at::Tensor& logp, const SftObjective& o) {
  return {(-logp).mean() * o.scale, {}, {}, {}};
}

ObjectiveResult ppo_objective(const at::Tensor& logp, const PpoObjective& o) {
  const int64_t B = logp.size(0), K = logp.size(1);
  RLLOOP_CHECK(o.n > 0 && o.n <= K, Invalid, "ppo: n = " << o.n << " must be in [1, K = " << K << "]");
  RLLOOP_CHECK(!o.old.defined() || o.old.numel() == B, Invalid, "ppo: old needs " << B << " values (one per row), got " << o.old.numel());
  RLLOOP_CHECK(o.adv.numel() == B, Invalid, "ppo: adv needs " << B << " values (one per row), got " << o.adv.numel());
  RLLOOP_CHECK(!o.ref.defined() || o.ref.numel() == B * o.n, Invalid, "ppo: ref needs B*n = " << B * o.n << " values, got " << o.ref.numel());
  RLLOOP_CHECK(!o.weight.defined() || o.weight.numel() == B, Invalid,
               "ppo: weight needs " << B << " values, got " << o.weight.numel());
  auto like = [&](const at::Tensor& t) { return t.to(logp.device(), at::kFloat); };
  at::Tensor lp = logp.narrow(1, 0, o.n);
  const at::Tensor old = o.old.defined() ? like(o.old).view({B}) : lp.sum(1).detach();
  const at::Tensor ref = o.ref.defined() ? like(o.ref).view({B, o.n}) : lp.detach();
  at::Tensor ratio = at::exp(lp.sum(1) - old);
  at::Tensor adv = like(o.adv).view({B});
  at::Tensor pg = -at::min(ratio * adv, ratio.clamp(1.0 - o.clip, 1.0 + o.clip) * adv);
  at::Tensor d = ref - lp;
  at::Tensor kl = (at::exp(d) - d - 1.0).sum(1);
  at::Tensor per_row = pg + o.beta * kl;
  if (o.weight.defined()) per_row = per_row * like(o.weight).view({B});
  return {per_row.mean() * o.scale, pg, kl, ratio};
}

}  // namespace rlloop
