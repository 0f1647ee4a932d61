// The chunked gated delta rule as six block programs (block_program.h): the forward in three kernels and the
// backward in four, the first shared. Same algorithm and notation as delta_rule_chunks.cpp, whose ATen
// formulation is their reference (docs/native-api.md), for C = 64 and key and value heads of one size D:
//
//   per chunk (all chunks at once): cum = cumsum(g), P_ij = exp(cum_i − cum_j) (j ≤ i, else 0), e = exp(cum),
//     f = exp(cum_last − cum), dec = exp(cum_last); A = (diag(β) k kᵀ) ⊙ P, intra = (q kᵀ) ⊙ P;
//     [U | W] = (I + SL(A))⁻¹ [v·β | k·β·e]  (SL: strictly lower);  Qd = q·e, Kend = k·f
//   scan over chunks (per sequence and block of value columns; S from zero):
//     V = U − W S;  S ← dec S + Kendᵀ V   (S_n: the state at chunk n's start)
//   per chunk: O = Qd S_n + intra V
//
// Backward, with dS the gradient of the state after chunk n (zero after the last):
//   reverse scan:  dV = Kend dS + intraᵀ dO;  dS ← dec dS + Qdᵀ dO − Wᵀ dV
//   per chunk:     dKend = V dSᵀ, ddec = ⟨S_n, dS⟩, dQd = dO S_nᵀ, dintra = dO Vᵀ, dW = −dV S_nᵀ;
//                  [dv·β | dk·β·e] = (I + SL(A))⁻ᵀ [dV | dW], dA = −SL(dR [U | W]ᵀ), then back to q, k, v, β, g.
//
// Tensors: q, k, v, U, W, V, O and their gradients [B·H·N chunks, 64, D] float32 (a sequence's chunks
// consecutive), β, g [chunks, 64], S states [chunks, D, D], intra and dintra [chunks, 64, 64], ddec [chunks].
// What goes through global memory between the kernels (U, W, V, the states, dV, ...) is what the ATen version
// materialises too; the gain is that each kernel reads a chunk once and keeps its 64 x 64 and 64 x D terms in
// shared memory, instead of ~60 float32 passes a layer over them (bench/RESULTS.md).
#pragma once
#include <cmath>
#include <cstdint>

#include "block_program.h"

namespace rlloop::delta_rule {

using block::Carve;
using block::Term;

constexpr int kChunk = 64;
// Added to every shared row: keeps rows 16-byte aligned and staggers them over the shared-memory banks.
constexpr int kPad = 4;
constexpr int kChunkLd = kChunk + kPad;

RLLOOP_HOST_DEVICE inline int row_ld(int cols) { return cols + kPad; }

// exp(cum_i − cum_j) where j ≤ i, else 0 (the chunk's pairwise decay).
RLLOOP_BLOCK_FN inline float pair_decay(const float* cum, int i, int j) {
  return j <= i ? expf(cum[i] - cum[j]) : 0.0f;
}

// ---------------------------------------------------------------------------------------------------------------
// Prep (forward and backward; one block per chunk): U and W, and with `intra` set also intra = (q kᵀ) ⊙ P.
struct Prep {
  const float *q, *k, *v, *beta, *g;
  float *U, *W, *intra;  // intra: nullable
  int D;

  struct Layout {
    int64_t k, R, A, I, cum, e, f, beta, floats;
    RLLOOP_HOST_DEVICE explicit Layout(int D) {
      Carve c;
      k = c.take(kChunk * row_ld(D));
      R = c.take(kChunk * row_ld(2 * D));  // [v·β | k·β·e], then [U | W]; q while intra is computed
      A = c.take(kChunk * kChunkLd);
      I = c.take(kChunk * kChunkLd);
      cum = c.take(kChunk);
      e = c.take(kChunk);
      f = c.take(kChunk);
      beta = c.take(kChunk);
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D) { return Layout(D).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    const Layout L(D);
    float *sk = shared + L.k, *sR = shared + L.R, *sA = shared + L.A, *sI = shared + L.I;
    float *cum = shared + L.cum, *e = shared + L.e, *f = shared + L.f, *sbeta = shared + L.beta;
    const int ldk = row_ld(D), ldR = row_ld(2 * D);
    const int64_t at = chunk * kChunk * D, at_c = chunk * kChunk;

    ex.copy(sk, ldk, k + at, D, kChunk, D);
    if (intra) ex.copy(sR, ldR, q + at, D, kChunk, D);
    ex.for_each(kChunk, [&](int i) { sbeta[i] = beta[at_c + i]; });
    ex.decays(g + at_c, cum, e, f);
    ex.sync();
    if (intra) {
      const Term qk{sR, ldR, false, sk, ldk, true, D, 1.0f};
      ex.mm(kChunk, kChunk, &qk, 1, sI, kChunkLd, 0.0f);
      ex.sync();
      float* out = intra + chunk * kChunk * kChunk;
      ex.for_each(kChunk * kChunk, [&](int x) {
        const int i = x / kChunk, j = x % kChunk;
        out[x] = sI[i * kChunkLd + j] * pair_decay(cum, i, j);
      });
    }
    const Term kk{sk, ldk, false, sk, ldk, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &kk, 1, sA, kChunkLd, 0.0f);
    ex.for_each(kChunk * D, [&](int x) {
      const int i = x / D, c = x % D;
      sR[i * ldR + c] = v[at + x] * sbeta[i];
      sR[i * ldR + D + c] = sk[i * ldk + c] * sbeta[i] * e[i];
    });
    ex.sync();
    ex.for_each(kChunk * kChunk, [&](int x) {  // A = (diag(β) k kᵀ) ⊙ P, strictly lower
      const int i = x / kChunk, j = x % kChunk;
      sA[i * kChunkLd + j] = j < i ? sbeta[i] * sA[i * kChunkLd + j] * expf(cum[i] - cum[j]) : 0.0f;
    });
    ex.sync();
    ex.solve(sA, kChunkLd, sR, ldR, 2 * D, /*transposed=*/false);
    ex.sync();
    ex.copy(U + at, D, sR, ldR, kChunk, D);
    ex.copy(W + at, D, sR + D, ldR, kChunk, D);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The forward scan: one block per sequence and block of BV value columns (the columns of S are independent), the
// chunks in order. Writes V and every chunk's starting state.
struct ScanForward {
  const float *U, *W, *k, *g;
  float *V, *states;
  int N, D, BV;

  struct Layout {
    int64_t S, M, V, cum, e, f, floats;
    RLLOOP_HOST_DEVICE Layout(int D, int BV) {
      Carve c;
      S = c.take(D * row_ld(BV));
      M = c.take(kChunk * row_ld(D));  // W, then Kend
      V = c.take(kChunk * row_ld(BV));
      cum = c.take(kChunk);
      e = c.take(kChunk);
      f = c.take(kChunk);
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D, int BV) { return Layout(D, BV).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t block) const {
    const Layout L(D, BV);
    float *sS = shared + L.S, *sM = shared + L.M, *sV = shared + L.V;
    float *cum = shared + L.cum, *e = shared + L.e, *f = shared + L.f;
    const int ldS = row_ld(BV), ldM = row_ld(D), ldV = row_ld(BV);
    const int64_t sequence = block / (D / BV);
    const int col = static_cast<int>(block % (D / BV)) * BV;

    ex.for_each(D * BV, [&](int x) { sS[(x / BV) * ldS + x % BV] = 0.0f; });
    for (int n = 0; n < N; ++n) {
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      ex.sync();
      ex.copy(states + chunk * D * D + col, D, sS, ldS, D, BV);
      ex.copy(sM, ldM, W + at, D, kChunk, D);
      ex.copy(sV, ldV, U + at + col, D, kChunk, BV);
      ex.decays(g + chunk * kChunk, cum, e, f);
      ex.sync();
      const Term ws{sM, ldM, false, sS, ldS, false, D, -1.0f};
      ex.mm(kChunk, BV, &ws, 1, sV, ldV, 1.0f);  // V = U − W S
      ex.sync();
      ex.copy(V + at + col, D, sV, ldV, kChunk, BV);
      if (n + 1 == N) break;
      ex.for_each(kChunk * D, [&](int x) { sM[(x / D) * ldM + x % D] = k[at + x] * f[x / D]; });  // Kend
      ex.sync();
      const Term kv{sM, ldM, true, sV, ldV, false, kChunk, 1.0f};
      ex.mm(D, BV, &kv, 1, sS, ldS, e[kChunk - 1]);  // S ← dec S + Kendᵀ V
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The output (one block per chunk): O = Qd S_n + intra V.
struct Output {
  const float *q, *k, *g, *V, *states;
  float* O;
  int D;

  struct Layout {
    int64_t q, kv, I, S, cum, e, f, floats;
    RLLOOP_HOST_DEVICE explicit Layout(int D) {
      Carve c;
      q = c.take(kChunk * row_ld(D));
      kv = c.take(kChunk * row_ld(D));  // k, then V
      I = c.take(kChunk * kChunkLd);
      S = c.take(D * row_ld(D));
      cum = c.take(kChunk);
      e = c.take(kChunk);
      f = c.take(kChunk);
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D) { return Layout(D).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    const Layout L(D);
    float *sq = shared + L.q, *skv = shared + L.kv, *sI = shared + L.I, *sS = shared + L.S;
    float *cum = shared + L.cum, *e = shared + L.e, *f = shared + L.f;
    const int ld = row_ld(D);
    const int64_t at = chunk * kChunk * D;

    ex.copy(sq, ld, q + at, D, kChunk, D);
    ex.copy(skv, ld, k + at, D, kChunk, D);
    ex.copy(sS, ld, states + chunk * D * D, D, D, D);
    ex.decays(g + chunk * kChunk, cum, e, f);
    ex.sync();
    const Term qk{sq, ld, false, skv, ld, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &qk, 1, sI, kChunkLd, 0.0f);
    ex.sync();
    ex.for_each(kChunk * kChunk, [&](int x) {
      const int i = x / kChunk, j = x % kChunk;
      sI[i * kChunkLd + j] *= pair_decay(cum, i, j);
    });
    ex.for_each(kChunk * D, [&](int x) { sq[(x / D) * ld + x % D] *= e[x / D]; });  // Qd
    ex.copy(skv, ld, V + at, D, kChunk, D);
    ex.sync();
    const Term terms[2] = {{sq, ld, false, sS, ld, false, D, 1.0f}, {sI, kChunkLd, false, skv, ld, false, kChunk, 1.0f}};
    ex.mm(kChunk, D, terms, 2, O + at, D, 0.0f);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The backward scan: one block per sequence and block of BV value columns, the chunks in reverse. Writes dV and
// the gradient of every chunk's end state (dS_next).
struct ScanBackward {
  const float *q, *k, *g, *W, *intra, *dO;
  float *dV, *dS_next;
  int N, D, BV;

  struct Layout {
    int64_t dS, M, I, dO, dV, cum, e, f, floats;
    RLLOOP_HOST_DEVICE Layout(int D, int BV) {
      Carve c;
      dS = c.take(D * row_ld(BV));
      M = c.take(kChunk * row_ld(D));  // Kend, then Qd, then W
      I = c.take(kChunk * kChunkLd);
      dO = c.take(kChunk * row_ld(BV));
      dV = c.take(kChunk * row_ld(BV));
      cum = c.take(kChunk);
      e = c.take(kChunk);
      f = c.take(kChunk);
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D, int BV) { return Layout(D, BV).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t block) const {
    const Layout L(D, BV);
    float *sdS = shared + L.dS, *sM = shared + L.M, *sI = shared + L.I, *sdO = shared + L.dO, *sdV = shared + L.dV;
    float *cum = shared + L.cum, *e = shared + L.e, *f = shared + L.f;
    const int ldS = row_ld(BV), ldM = row_ld(D), ldV = row_ld(BV);
    const int64_t sequence = block / (D / BV);
    const int col = static_cast<int>(block % (D / BV)) * BV;

    ex.for_each(D * BV, [&](int x) { sdS[(x / BV) * ldS + x % BV] = 0.0f; });
    for (int n = N - 1; n >= 0; --n) {
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      ex.sync();
      ex.copy(dS_next + chunk * D * D + col, D, sdS, ldS, D, BV);
      ex.copy(sI, kChunkLd, intra + chunk * kChunk * kChunk, kChunk, kChunk, kChunk);
      ex.copy(sdO, ldV, dO + at + col, D, kChunk, BV);
      ex.decays(g + chunk * kChunk, cum, e, f);
      ex.sync();
      ex.for_each(kChunk * D, [&](int x) { sM[(x / D) * ldM + x % D] = k[at + x] * f[x / D]; });  // Kend
      ex.sync();
      const Term dv[2] = {{sM, ldM, false, sdS, ldS, false, D, 1.0f}, {sI, kChunkLd, true, sdO, ldV, false, kChunk, 1.0f}};
      ex.mm(kChunk, BV, dv, 2, sdV, ldV, 0.0f);  // dV = Kend dS + intraᵀ dO
      ex.sync();
      ex.copy(dV + at + col, D, sdV, ldV, kChunk, BV);
      if (n == 0) break;
      ex.for_each(kChunk * D, [&](int x) { sM[(x / D) * ldM + x % D] = q[at + x] * e[x / D]; });  // Qd
      ex.sync();
      const Term qo{sM, ldM, true, sdO, ldV, false, kChunk, 1.0f};
      ex.mm(D, BV, &qo, 1, sdS, ldS, e[kChunk - 1]);  // dS ← dec dS + Qdᵀ dO
      ex.sync();
      ex.copy(sM, ldM, W + at, D, kChunk, D);
      ex.sync();
      const Term wv{sM, ldM, true, sdV, ldV, false, kChunk, -1.0f};
      ex.mm(D, BV, &wv, 1, sdS, ldS, 1.0f);  // dS −= Wᵀ dV
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The gradients that go through the states (one block per chunk): dKend, dQd, dW, dintra and ddec.
struct StateGrads {
  const float *U, *W, *states, *dS_next, *dO, *dV;
  float *dKend, *dQd, *dW, *dintra, *ddec;
  int D;

  struct Layout {
    int64_t S, M, V, dO, floats;
    RLLOOP_HOST_DEVICE explicit Layout(int D) {
      Carve c;
      S = c.take(D * row_ld(D));  // S_n, then dS
      M = c.take(kChunk * row_ld(D));  // W, then dV
      V = c.take(kChunk * row_ld(D));  // U, then V
      dO = c.take(kChunk * row_ld(D));
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D) { return Layout(D).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    const Layout L(D);
    float *sS = shared + L.S, *sM = shared + L.M, *sV = shared + L.V, *sdO = shared + L.dO;
    const int ld = row_ld(D);
    const int64_t at = chunk * kChunk * D;
    const float* dS = dS_next + chunk * D * D;

    ex.copy(sS, ld, states + chunk * D * D, D, D, D);
    ex.copy(sM, ld, W + at, D, kChunk, D);
    ex.copy(sV, ld, U + at, D, kChunk, D);
    ex.copy(sdO, ld, dO + at, D, kChunk, D);
    ex.sync();
    const Term ws{sM, ld, false, sS, ld, false, D, -1.0f};
    ex.mm(kChunk, D, &ws, 1, sV, ld, 1.0f);  // V = U − W S_n
    const Term os{sdO, ld, false, sS, ld, true, D, 1.0f};
    ex.mm(kChunk, D, &os, 1, dQd + at, D, 0.0f);  // dQd = dO S_nᵀ
    ex.sync();
    ex.copy(sM, ld, dV + at, D, kChunk, D);
    ex.sync();
    const Term vs{sM, ld, false, sS, ld, true, D, -1.0f};
    ex.mm(kChunk, D, &vs, 1, dW + at, D, 0.0f);  // dW = −dV S_nᵀ
    const Term ov{sdO, ld, false, sV, ld, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &ov, 1, dintra + chunk * kChunk * kChunk, kChunk, 0.0f);  // dintra = dO Vᵀ
    const float dot = ex.sum(D * D, [&](int x) { return sS[(x / D) * ld + x % D] * dS[x]; });  // ⟨S_n, dS⟩
    ex.single([&] { ddec[chunk] = dot; });
    ex.copy(sS, ld, dS, D, D, D);
    ex.sync();
    const Term vd{sV, ld, false, sS, ld, true, D, 1.0f};
    ex.mm(kChunk, D, &vd, 1, dKend + at, D, 0.0f);  // dKend = V dSᵀ
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The gradients inside a chunk (one block per chunk): through the transposed solve and the chunk terms back to
// q, k, v, β and g.
struct IntraGrads {
  const float *q, *k, *v, *beta, *g, *U, *W, *intra, *dV, *dW, *dKend, *dQd, *dintra, *ddec;
  float *grad_q, *grad_k, *grad_v, *grad_beta, *grad_g;
  int D;

  struct Layout {
    int64_t k, R, X, M1, M2, M3, cum, e, f, beta, beta_v, beta_k, de_k, de_q, df, rows, cols, floats;
    RLLOOP_HOST_DEVICE explicit Layout(int D) {
      Carve c;
      k = c.take(kChunk * row_ld(D));
      R = c.take(kChunk * row_ld(2 * D));  // [dV | dW] → [dv·β | dk·β·e]; then dk·β = dkb on the right, q on the left
      X = c.take(kChunk * row_ld(D));      // U, W, then grad_k, grad_q
      M1 = c.take(kChunk * kChunkLd);      // k kᵀ, A, then d log P
      M2 = c.take(kChunk * kChunkLd);      // dA, then dKK = dA ⊙ P (rows scaled by β for grad_k)
      M3 = c.take(kChunk * kChunkLd);      // dQK = dintra ⊙ P
      cum = c.take(kChunk);
      e = c.take(kChunk);
      f = c.take(kChunk);
      beta = c.take(kChunk);
      beta_v = c.take(kChunk);  // Σ dvb ⊙ v
      beta_k = c.take(kChunk);  // Σ dkb ⊙ k
      de_k = c.take(kChunk);    // Σ dkbe ⊙ k
      de_q = c.take(kChunk);    // Σ dQd ⊙ q
      df = c.take(kChunk);      // Σ dKend ⊙ k
      rows = c.take(kChunk);    // row sums of d log P
      cols = c.take(kChunk);    // column sums of d log P
      floats = c.used();
    }
  };
  static int64_t shared_floats(int D) { return Layout(D).floats; }

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    const Layout L(D);
    float *sk = shared + L.k, *sR = shared + L.R, *sX = shared + L.X;
    float *M1 = shared + L.M1, *M2 = shared + L.M2, *M3 = shared + L.M3;
    float *cum = shared + L.cum, *e = shared + L.e, *f = shared + L.f, *sbeta = shared + L.beta;
    float *beta_v = shared + L.beta_v, *beta_k = shared + L.beta_k, *de_k = shared + L.de_k, *de_q = shared + L.de_q;
    float *df = shared + L.df, *rows = shared + L.rows, *cols = shared + L.cols;
    const int ld = row_ld(D), ldR = row_ld(2 * D);
    const int64_t at = chunk * kChunk * D, at_c = chunk * kChunk, at_m = chunk * kChunk * kChunk;
    float* sdkb = sR + D;  // the right half of R
    float* sq = sR;        // the left half, once dv·β is used up

    ex.copy(sk, ld, k + at, D, kChunk, D);
    ex.copy(sR, ldR, dV + at, D, kChunk, D);
    ex.copy(sR + D, ldR, dW + at, D, kChunk, D);
    ex.for_each(kChunk, [&](int i) { sbeta[i] = beta[at_c + i]; });
    ex.decays(g + at_c, cum, e, f);
    ex.sync();
    const Term kk{sk, ld, false, sk, ld, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &kk, 1, M1, kChunkLd, 0.0f);
    ex.sync();
    ex.for_each(kChunk * kChunk, [&](int x) {  // A, strictly lower
      const int i = x / kChunk, j = x % kChunk;
      M1[i * kChunkLd + j] = j < i ? sbeta[i] * M1[i * kChunkLd + j] * expf(cum[i] - cum[j]) : 0.0f;
    });
    ex.copy(sX, ld, U + at, D, kChunk, D);
    ex.sync();
    ex.solve(M1, kChunkLd, sR, ldR, 2 * D, /*transposed=*/true);  // dR = (I + SL(A))⁻ᵀ [dV | dW]
    ex.sync();
    const Term ru{sR, ldR, false, sX, ld, true, D, -1.0f};
    ex.mm(kChunk, kChunk, &ru, 1, M2, kChunkLd, 0.0f);  // dA = −(dvb Uᵀ + dkbe Wᵀ), masked below
    ex.row_sums(kChunk, D, beta_v, [&](int r, int c) { return sR[r * ldR + c] * v[at + r * D + c]; });
    ex.row_sums(kChunk, D, de_k, [&](int r, int c) { return sR[r * ldR + D + c] * sk[r * ld + c]; });
    ex.for_each(kChunk * D, [&](int x) { grad_v[at + x] = sR[(x / D) * ldR + x % D] * sbeta[x / D]; });
    ex.sync();
    ex.copy(sX, ld, W + at, D, kChunk, D);
    ex.sync();
    const Term rw{sR + D, ldR, false, sX, ld, true, D, -1.0f};
    ex.mm(kChunk, kChunk, &rw, 1, M2, kChunkLd, 1.0f);
    ex.sync();
    ex.for_each(kChunk * kChunk, [&](int x) {
      const int i = x / kChunk, j = x % kChunk;
      const float dA = j < i ? M2[i * kChunkLd + j] : 0.0f;
      const float p = pair_decay(cum, i, j), di = dintra[at_m + x];
      M1[i * kChunkLd + j] = dA * M1[i * kChunkLd + j] + di * intra[at_m + x];  // d log P = dA ⊙ A + dintra ⊙ intra
      M2[i * kChunkLd + j] = dA * p;                                          // dKK
      M3[i * kChunkLd + j] = di * p;                                          // dQK
    });
    ex.for_each(kChunk * D, [&](int x) { sdkb[(x / D) * ldR + x % D] *= e[x / D]; });  // dkbe ⊙ e
    ex.sync();
    ex.row_sums(kChunk, kChunk, rows, [&](int r, int c) { return M1[r * kChunkLd + c]; });
    ex.row_sums(kChunk, kChunk, cols, [&](int r, int c) { return M1[c * kChunkLd + r]; });
    const Term kkb{M2, kChunkLd, false, sk, ld, false, kChunk, 1.0f};
    ex.mm(kChunk, D, &kkb, 1, sdkb, ldR, 1.0f);  // dkb = dkbe ⊙ e + dKK k
    ex.row_sums(kChunk, D, df, [&](int r, int c) { return dKend[at + r * D + c] * sk[r * ld + c]; });
    ex.for_each(kChunk * D, [&](int x) { sX[(x / D) * ld + x % D] = dKend[at + x] * f[x / D]; });
    ex.sync();
    ex.row_sums(kChunk, D, beta_k, [&](int r, int c) { return sdkb[r * ldR + c] * sk[r * ld + c]; });
    ex.for_each(kChunk * D, [&](int x) { sX[(x / D) * ld + x % D] += sdkb[(x / D) * ldR + x % D] * sbeta[x / D]; });
    ex.for_each(kChunk * kChunk, [&](int x) { M2[(x / kChunk) * kChunkLd + x % kChunk] *= sbeta[x / kChunk]; });
    ex.copy(sq, ldR, q + at, D, kChunk, D);
    ex.sync();
    // grad_k = dKend ⊙ f + dkb ⊙ β + dKKᵀ (k·β) + dQKᵀ q, the β of k·β moved onto dKK's rows
    const Term gk[2] = {{M2, kChunkLd, true, sk, ld, false, kChunk, 1.0f}, {M3, kChunkLd, true, sq, ldR, false, kChunk, 1.0f}};
    ex.mm(kChunk, D, gk, 2, sX, ld, 1.0f);
    ex.row_sums(kChunk, D, de_q, [&](int r, int c) { return dQd[at + r * D + c] * sq[r * ldR + c]; });
    ex.for_each(kChunk, [&](int i) { grad_beta[at_c + i] = beta_v[i] + beta_k[i]; });
    ex.sync();
    ex.copy(grad_k + at, D, sX, ld, kChunk, D);
    ex.single([&] {  // g: through P (rows +, columns −), e, f and dec, then cum = cumsum(g) backwards
      float carry = 0.0f, tail = ddec[chunk] * e[kChunk - 1];
      for (int i = 0; i < kChunk; ++i) tail += df[i] * f[i];
      for (int i = kChunk - 1; i >= 0; --i) {
        float d = rows[i] - cols[i] + (sbeta[i] * de_k[i] + de_q[i]) * e[i] - df[i] * f[i];
        if (i == kChunk - 1) d += tail;
        carry += d;
        grad_g[at_c + i] = carry;
      }
    });
    ex.sync();
    ex.for_each(kChunk * D, [&](int x) { sX[(x / D) * ld + x % D] = dQd[at + x] * e[x / D]; });
    ex.sync();
    const Term qk{M3, kChunkLd, false, sk, ld, false, kChunk, 1.0f};
    ex.mm(kChunk, D, &qk, 1, sX, ld, 1.0f);  // grad_q = dQd ⊙ e + dQK k
    ex.sync();
    ex.copy(grad_q + at, D, sX, ld, kChunk, D);
  }
};

}  // namespace rlloop::delta_rule
