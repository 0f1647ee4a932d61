#include "delta_rule/aten.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <limits>
#include <optional>
#include <vector>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#include "model/gdn_ops.h"

namespace rlloop {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Everything a chunk needs besides the recurrent state, batched over [B, H, N] (notation of the derivation in
// backward below: P pairwise decay, KK = (k·β) kᵀ, A = KK ⊙ P, QK = q kᵀ, intra = QK ⊙ P, e = exp(cum),
// f = exp(cum_last − cum), [U | W] = (I + SL(A))⁻¹ [v·β | k·β·e], Qd = q·e, Kend = k·f, dec = exp(cum_last)).
// `differentiable`: the triangular solve as an autograd op (the default path), or plain (inside DeltaRuleChunks).
struct Chunks {
  at::Tensor cum, P, kb, vb, KK, A, QK, intra, e, f, X, U, W, Qd, Kend, dec;
};

Chunks chunk_terms(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                   const at::Tensor& g, bool differentiable) {
  Chunks c;
  const int64_t C = q.size(3), dv = v.size(4);
  c.cum = g.cumsum(-1);  // log of the decay from the chunk start to position t
  // exp(cum_i − cum_j) for j <= i; the upper triangle goes to −inf before exp, so nothing overflows
  at::Tensor upper = at::ones({C, C}, q.options().dtype(at::kBool)).triu(1);
  c.P = (c.cum.unsqueeze(-1) - c.cum.unsqueeze(-2)).masked_fill(upper, -std::numeric_limits<double>::infinity()).exp();
  c.kb = k * beta.unsqueeze(-1);
  c.vb = v * beta.unsqueeze(-1);
  c.KK = at::matmul(c.kb, k.transpose(-1, -2));
  c.A = c.KK * c.P;
  c.QK = at::matmul(q, k.transpose(-1, -2));
  c.intra = c.QK * c.P;
  c.e = c.cum.exp().unsqueeze(-1);
  at::Tensor last = c.cum.narrow(-1, C - 1, 1);
  c.f = (last - c.cum).exp().unsqueeze(-1);
  // UT transform: one unit-lower solve for [v·β | k·β·e] (the diagonal and the zero upper part of A are ignored)
  at::Tensor rhs = at::cat({c.vb, c.kb * c.e}, -1);
  c.X = differentiable ? unit_lower_solve(c.A, rhs) : unit_lower_solve_raw(c.A, rhs, /*transpose=*/false);
  c.U = c.X.narrow(-1, 0, dv);
  c.W = c.X.narrow(-1, dv, c.X.size(-1) - dv);
  c.Qd = q * c.e;       // reads the state at the chunk start
  c.Kend = k * c.f;     // writes decayed to the chunk end
  c.dec = last.exp().squeeze(-1);  // [B, H, N]
  return c;
}

// The sequential scan over the N chunks (not over tokens), state S [B·H, dk, dv] from zero:
//   V = U − W S_n; O_n = Qd S_n + intra V; S_{n+1} = dec S_n + Kendᵀ V.
// Only V and the next state depend on the previous chunk, so only they are in the loop (three small products a
// chunk); O, which needs S_n and V of its own chunk only, is one batched product over every chunk afterwards. Each
// sum rides on a product's accumulator (baddbmm); the chunk's views are batch-strided matrices (no copies).
// Returns O [B, H, N, C, dv]; with `states` (dense [B, H, N, dk, dv]), S_n is also written to states[:, :, n].
// `differentiable`: autograd records the loop (RLLOOP_GDN_BACKWARD=autograd), so no out= products (autograd
// cannot differentiate them).
at::Tensor scan(const Chunks& c, at::Tensor* states, bool differentiable) {
  const int64_t B = c.U.size(0), H = c.U.size(1), N = c.U.size(2), C = c.U.size(3), dk = c.W.size(4),
                dv = c.U.size(4);
  const at::Tensor U = c.U.flatten(0, 1), W = c.W.flatten(0, 1), Kend = c.Kend.flatten(0, 1), dec = c.dec.flatten(0, 1);
  at::Tensor S = at::zeros({B * H, dk, dv}, c.U.options());
  TORCH_INTERNAL_ASSERT(!(differentiable && states), "scan: states are kept by the non-differentiable path only");
  // S_n and V of every chunk, [B·H, N, dk, dv] and [B·H, N, C, dv]: written in place by out= products, or (under
  // autograd) collected and stacked once
  at::Tensor S_all = differentiable ? at::Tensor()
                                    : states ? states->flatten(0, 1) : at::empty({B * H, N, dk, dv}, c.U.options());
  at::Tensor V_all = differentiable ? at::Tensor() : at::empty({B * H, N, C, dv}, c.U.options());
  std::vector<at::Tensor> Ss, Vs;
  for (int64_t n = 0; n < N; ++n) {
    at::Tensor V;
    if (differentiable) {
      Ss.push_back(S);
      V = Vs.emplace_back(at::baddbmm(U.select(1, n), W.select(1, n), S, /*beta=*/1, /*alpha=*/-1));
    } else {
      S_all.select(1, n).copy_(S);
      V = V_all.select(1, n);
      at::baddbmm_out(V, U.select(1, n), W.select(1, n), S, /*beta=*/1, /*alpha=*/-1);
    }
    if (n + 1 < N) S = at::baddbmm(S * dec.select(1, n).view({B * H, 1, 1}), Kend.select(1, n).transpose(1, 2), V);
  }
  if (differentiable) {
    S_all = at::stack(Ss, 1);
    V_all = at::stack(Vs, 1);
  }
  const at::Tensor O = at::baddbmm(at::bmm(c.Qd.flatten(0, 2), S_all.flatten(0, 1)), c.intra.flatten(0, 2),
                                   V_all.flatten(0, 1));
  return O.view({B, H, N, C, dv});
}

struct DeltaRuleChunks : public torch::autograd::Function<DeltaRuleChunks> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& beta, const at::Tensor& g) {
    const Chunks c = chunk_terms(q, k, v, beta, g, /*differentiable=*/false);
    at::Tensor states = at::empty({q.size(0), q.size(1), q.size(2), q.size(4), v.size(4)}, q.options());
    at::Tensor out = scan(c, &states, /*differentiable=*/false);
    ctx->save_for_backward({q, k, v, beta, g, states});
    return out;
  }

  // Reverse of the recurrence (per chunk n, with dS the gradient of S_{n+1}):
  //   V = U − W S_n; O = Qd S_n + intra V; S_{n+1} = dec S_n + Kendᵀ V
  //   dV = Kend dS + intraᵀ dO; dKend = V dSᵀ; ddec = ⟨S_n, dS⟩; dQd = dO S_nᵀ; dintra = dO Vᵀ
  //   dU = dV; dW = −dV S_nᵀ; dS_n = dec dS + Qdᵀ dO − Wᵀ dV
  // then, batched over the chunks, the intra-chunk terms back to q, k, v, beta and g (cum = cumsum g).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.delta_rule");
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &beta = saved[3], &g = saved[4], &states = saved[5];
    const at::Tensor dO = grads[0].contiguous();
    // The three parts time themselves too ("of which" figures under gdn.delta_rule in RLLOOP_BACKWARD_TIMELINE).
    std::optional<BackwardNodeTimer> part(std::in_place, "gdn.delta_rule.recompute");
    const Chunks c = chunk_terms(q, k, v, beta, g, /*differentiable=*/false);
    part.emplace("gdn.delta_rule.scan");
    const int64_t B = q.size(0), H = q.size(1), N = q.size(2), C = q.size(3), dk = q.size(4), dv = v.size(4);

    // Only dV and dS depend on the next chunk, so only they are in the loop: dV lands in its place in dX (the
    // gradient of [U | W]), and each chunk's dS (the gradient of S_{n+1}) is kept; the rest is batched over every
    // chunk afterwards. The buffers are allocated dense, so their flatten views alias them.
    at::Tensor dX = at::empty(c.X.sizes(), c.X.options());
    at::Tensor dS_next = at::empty(states.sizes(), states.options());  // [B, H, N, dk, dv]
    const at::Tensor W = c.W.flatten(0, 1), Qd = c.Qd.flatten(0, 1), intra = c.intra.flatten(0, 1),
                     Kend = c.Kend.flatten(0, 1), dec = c.dec.flatten(0, 1), dO_all = dO.flatten(0, 1);
    const at::Tensor dU_all = dX.flatten(0, 1).narrow(-1, 0, dv), dS_all = dS_next.flatten(0, 1);
    at::Tensor dS = at::zeros({B * H, dk, dv}, q.options());
    for (int64_t n = N - 1; n >= 0; --n) {
      const at::Tensor dOn = dO_all.select(1, n);
      dS_all.select(1, n).copy_(dS);
      at::Tensor dV = dU_all.select(1, n);
      at::bmm_out(dV, Kend.select(1, n), dS);
      dV.baddbmm_(intra.select(1, n).transpose(1, 2), dOn);
      if (n > 0) {
        dS = at::baddbmm(at::baddbmm(dS * dec.select(1, n).view({B * H, 1, 1}), Qd.select(1, n).transpose(1, 2), dOn),
                         W.select(1, n).transpose(1, 2), dV, /*beta=*/1, /*alpha=*/-1);
      }
    }
    // Batched over the chunks ([B·H·N] matrices): V again, then dKend = V dSᵀ, ddec = ⟨S_n, dS⟩, dQd = dO S_nᵀ,
    // dintra = dO Vᵀ, dW = −dV S_nᵀ (into its place in dX; beta = 0: the buffer's old contents are ignored).
    const at::Tensor S3 = states.flatten(0, 2), dS3 = dS_next.flatten(0, 2), dO3 = dO.flatten(0, 2),
                     dX3 = dX.flatten(0, 2);
    const at::Tensor V3 = at::baddbmm(c.U.flatten(0, 2), c.W.flatten(0, 2), S3, /*beta=*/1, /*alpha=*/-1);
    const at::Tensor dKend = at::bmm(V3, dS3.transpose(1, 2)).view(c.Kend.sizes());
    const at::Tensor ddec = (S3 * dS3).sum({-1, -2}).view(c.dec.sizes());
    const at::Tensor dQd = at::bmm(dO3, S3.transpose(1, 2)).view(c.Qd.sizes());
    const at::Tensor dintra = at::bmm(dO3, V3.transpose(1, 2)).view(c.intra.sizes());
    dX3.narrow(-1, dv, dk).baddbmm_(dX3.narrow(-1, 0, dv), S3.transpose(1, 2), /*beta=*/0, /*alpha=*/-1);
    part.emplace("gdn.delta_rule.intra_chunk");

    // [U | W] = M⁻¹ R with M = I + SL(A): dR = M⁻ᵀ dX, dA = −SL(dR Xᵀ)
    const at::Tensor dR = unit_lower_solve_raw(c.A, dX, /*transpose=*/true);
    const at::Tensor dA = at::matmul(dR, c.X.transpose(-1, -2)).tril(-1).neg_();
    const at::Tensor dvb = dR.narrow(-1, 0, dv), dkbe = dR.narrow(-1, dv, dk);
    at::Tensor de = (dkbe * c.kb).sum(-1) + (dQd * q).sum(-1);  // [B, H, N, C]: d/de of k·β·e and q·e
    // A = KK ⊙ P, intra = QK ⊙ P. The products are batched over the [B·H·N] chunks and take the terms they are
    // summed with as their accumulator (baddbmm), so no sum is a pass of its own.
    const auto chunks = [](const at::Tensor& x) { return x.flatten(0, 2); };
    const auto t = [](const at::Tensor& m) { return m.transpose(-1, -2); };
    const at::Tensor dKK = chunks(dA * c.P), dQK = chunks(dintra * c.P), k3 = chunks(k), q3 = chunks(q);
    at::Tensor dlogP = at::addcmul(dA * c.KK, dintra, c.QK).mul_(c.P);  // dP ⊙ P: the gradient of log P
    const at::Tensor dkb = at::baddbmm(chunks(dkbe * c.e), dKK, k3).view(k.sizes());
    at::Tensor grad_k = at::baddbmm(at::baddbmm(chunks(dKend * c.f), t(dKK), chunks(c.kb)), t(dQK), q3).view(k.sizes());
    const at::Tensor grad_q = at::baddbmm(chunks(dQd * c.e), dQK, k3).view(q.sizes());
    grad_k.addcmul_(dkb, beta.unsqueeze(-1));
    const at::Tensor grad_v = dvb * beta.unsqueeze(-1);
    const at::Tensor grad_beta = (dkb * k).sum(-1) + (dvb * v).sum(-1);
    // cum: through P (exp(cum_i − cum_j)), e = exp(cum), f = exp(cum_last − cum), dec = exp(cum_last)
    const at::Tensor df = (dKend * k).sum(-1) * c.f.squeeze(-1);
    at::Tensor dcum = dlogP.sum(-1) - dlogP.sum(-2) + de * c.e.squeeze(-1) - df;
    dcum.narrow(-1, C - 1, 1).add_((df.sum(-1) + ddec * c.dec).unsqueeze(-1));
    const at::Tensor grad_g = dcum.flip(-1).cumsum(-1).flip(-1);  // cum = cumsum(g) within the chunk
    return {grad_q, grad_k, grad_v, grad_beta, grad_g};
  }
};

}  // namespace

at::Tensor delta_rule_chunks(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                             const at::Tensor& g) {
  const bool graph = at::GradMode::is_enabled() &&
                     (q.requires_grad() || k.requires_grad() || v.requires_grad() || beta.requires_grad() || g.requires_grad());
  if (!graph) return scan(chunk_terms(q, k, v, beta, g, /*differentiable=*/false), nullptr, /*differentiable=*/false);  // no states to keep
  if (delta_rule_backward_is_manual()) return DeltaRuleChunks::apply(q, k, v, beta, g);
  return scan(chunk_terms(q, k, v, beta, g, /*differentiable=*/true), nullptr, /*differentiable=*/true);  // autograd records every op
}

}  // namespace rlloop
