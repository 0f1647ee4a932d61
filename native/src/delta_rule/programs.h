// The chunked gated delta rule as seven block programs (block/program.h): the forward in three kernels and the
// backward in four. Same algorithm and notation as delta_rule/aten.cpp, whose ATen formulation is their reference
// (docs/native-api.md), for C = 64 and key and value heads of one size D:
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
//                  [dv·β | dk·β·e] = (I + SL(A))⁻ᵀ [dV | dW] = [dV | dW] + Tᵀ [dV | dW]
//                  with T = (I + SL(A))⁻¹ − I,
//                  dA = −SL(dR [U | W]ᵀ), then back to q, k, v, β, g.
//
// Tensors: q, k, v, U, W, V, O, Kend, Qd and their gradients [B·H·N chunks, 64, D] float32 (a sequence's chunks
// consecutive), β, g [chunks, 64], S states [chunks, D, D], T, intra and dintra [chunks, 64, 64], ddec [chunks].
// What goes through global memory between the kernels is about what the ATen version materialises too; the gain
// is that each kernel reads a chunk's tensors once instead of ~150 ATen operations a layer passing over them.
// The forward keeps U, W and T for the backward beside the states (2 x 117 + 59 MB a layer at 16 rows of ~420
// tokens, 32 heads of 128): the backward recomputes only the cheap chunk terms (ChunkTerms), and its transposed
// solve is a product with T instead of four rounds of serial substitutions. T leaves out the inverse's unit
// diagonal so that the identity's share of the result, [dV | dW] itself, stays exact where the product is TF32.
// The solves run in blocks of 16 rows (unit_lower_solve): products for the off-diagonal blocks, so in TF32 on a
// bfloat16 model like the rest, and float32 substitutions inside the diagonal ones.
//
// Memory: every operand reaches shared memory through the executor's asynchronous loads (block/program.h), all
// of a phase's in flight at once, and the products and elementwise passes read shared memory only (products
// straight from global memory, tried, saturated L1 with re-read fragments: 1.4x slower; elementwise passes over
// global memory waited for one load a thread at a time). The chunk kernels load most of a chunk up front (one
// block an SM: 186-223 KiB) and the rest into regions as they free up; the scans hold the chunk's full-width
// operands in shared memory and load the next chunk's during the current chunk's products.
#pragma once
#include <cmath>
#include <cstdint>

#include "block/program.h"

namespace rlloop::delta_rule {

using block::region;
using block::Term;

constexpr int kChunk = 64;
// Shared rows are padded: 16-byte aligned, and staggered over the 32 banks for the tensor cores' tile loads. A TF32
// fragment puts its 32 lanes on 8 rows x 4 columns of a row-major tile (an A operand read as stored, a transposed
// B), or on 4 rows x 8 columns (a transposed A, a B read as stored, and an accumulator tile's paired elements):
// the first pattern meets every bank once when the stride is 4 (mod 32) floats, the second when it is 8. Each
// region takes the stride of the way the products read it most (Nsight: the scans' 2-way conflicts on every
// shared load, with one stride for all).
constexpr int kPad = 4;
constexpr int kChunkLd = kChunk + kPad;

constexpr int row_ld(int cols) { return cols + kPad; }  // rows read 8 at a time: row-major A, transposed B
constexpr int col_ld(int cols) { return cols + 2 * kPad; }  // rows read 4 at a time: transposed A, B, accumulators

// The shapes every program assumes: tiles of 16 (the tensor cores'), whole float4s, scan blocks dividing D.
template <int D, int BV = D>
constexpr bool kShapesFit = D % 16 == 0 && BV % 16 == 0 && D % BV == 0;

// exp(cum_i − cum_j) where j ≤ i, else 0 (the chunk's pairwise decay).
RLLOOP_BLOCK_FN inline float pair_decay(const float* cum, int i, int j) {
  return j <= i ? expf(cum[i] - cum[j]) : 0.0f;
}

// X ← (I + SL(A))⁻¹ X for A 64 x 64 (leading dimension LDA) and X 64 x NC, in blocks of 16 rows: each block row
// takes the products with the rows already solved (one matrix product, on the tensor cores where the executor has
// them), then a 16-row substitution, one column a thread.
template <int NC, int LDA = kChunkLd, class Exec>
RLLOOP_BLOCK_FN void unit_lower_solve(const Exec& ex, const float* A, float* X, int ldx) {
  constexpr int kBlock = 16, kBlocks = kChunk / kBlock;
  for (int b = 0; b < kBlocks; ++b) {
    const int r0 = b * kBlock;
    if (b > 0) {
      const Term t{A + r0 * LDA, LDA, false, X, ldx, false, r0, -1.0f};  // X_b −= A[b, :b] X[:b]
      ex.mm(kBlock, NC, &t, 1, X + r0 * ldx, ldx, 1.0f);
      ex.sync();
    }
    ex.solve16(A + r0 * LDA + r0, LDA, X + r0 * ldx, ldx, NC);
    ex.sync();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Prep (the forward; one block per chunk): U, W and Kend = k·f, and for the backward the solve's inverse less its
// unit diagonal, T = (I + SL(A))⁻¹ − I (strictly lower), solved beside them as the identity's columns: the same
// substitutions column by column, so U and W come out the same with or without it. The forward keeps U, W and T for
// the backward; a forward without one (no gradient) passes T = nullptr and solves U and W only.
template <int D>
struct Prep {
  static_assert(kShapesFit<D>, "head size: a multiple of 16");
  static constexpr int kThreads = 256;
  static constexpr int kLdR = row_ld(2 * D + kChunk);
  // R: [v | k | I], scaled to [v·β | k·β·e | I] and solved in place to [U | W | T + I]
  static constexpr int64_t kR = 0, kA = kR + region(kChunk * kLdR), kVectors = kA + region(kChunk * kChunkLd),
                           kSharedFloats = kVectors + 4 * kChunk;

  const float *k, *v, *beta, *g;
  float *U, *W, *Kend, *T;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    float *sR = shared + kR, *sA = shared + kA;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk, *sbeta = f + kChunk;
    float* sk = sR + D;  // the middle part
    float* sI = sR + 2 * D;  // the right part
    const int64_t at = chunk * kChunk * D, at_c = chunk * kChunk;

    ex.load(sk, kLdR, k + at, D, kChunk, D);
    ex.load(sbeta, kChunk, beta + at_c, kChunk, 1, kChunk);
    ex.load(sR, kLdR, v + at, D, kChunk, D);
    ex.decays(g + at_c, cum, e, f);
    if (T) ex.for_each(kChunk * kChunk, [&](int x) {  // the identity
      const int i = x / kChunk, j = x % kChunk;
      sI[i * kLdR + j] = i == j ? 1.0f : 0.0f;
    });
    ex.template sync_all_but<1>();  // k and β: k kᵀ and Kend run while v lands
    const Term kk{sk, kLdR, false, sk, kLdR, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &kk, 1, sA, kChunkLd, 0.0f);
    ex.for_each(kChunk * D, [&](int x) { Kend[at + x] = sk[(x / D) * kLdR + x % D] * f[x / D]; });
    ex.sync();
    ex.for_each(kChunk * kChunk, [&](int x) {  // A = (diag(β) k kᵀ) ⊙ P, strictly lower
      const int i = x / kChunk, j = x % kChunk;
      sA[i * kChunkLd + j] = j < i ? sbeta[i] * sA[i * kChunkLd + j] * expf(cum[i] - cum[j]) : 0.0f;
    });
    ex.for_each(kChunk * D, [&](int x) { sk[(x / D) * kLdR + x % D] *= sbeta[x / D] * e[x / D]; });
    ex.for_each(kChunk * D, [&](int x) { sR[(x / D) * kLdR + x % D] *= sbeta[x / D]; });
    ex.sync();
    if (T) {
      unit_lower_solve<2 * D + kChunk>(ex, sA, sR, kLdR);
      float* out = T + chunk * kChunk * kChunk;
      ex.for_each(kChunk * kChunk, [&](int x) {  // less its unit diagonal
        const int i = x / kChunk, j = x % kChunk;
        out[x] = i == j ? 0.0f : sI[i * kLdR + j];
      });
    } else {
      unit_lower_solve<2 * D>(ex, sA, sR, kLdR);
    }
    ex.copy(U + at, D, sR, kLdR, kChunk, D);
    ex.copy(W + at, D, sk, kLdR, kChunk, D);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The backward's chunk terms beside what the forward kept (one block per chunk): intra = (q kᵀ) ⊙ P, Qd = q·e and
// Kend = k·f — two loads and one 64 x 64 product, where recomputing U and W took the solve as well.
template <int D>
struct ChunkTerms {
  static_assert(kShapesFit<D>, "head size: a multiple of 16");
  static constexpr int kThreads = 256;
  static constexpr int kLd = row_ld(D);
  static constexpr int64_t kQ = 0, kK = kQ + region(kChunk * kLd), kI = kK + region(kChunk * kLd),
                           kVectors = kI + region(kChunk * kChunkLd), kSharedFloats = kVectors + 3 * kChunk;

  const float *q, *k, *g;
  float *intra, *Qd, *Kend;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    float *sq = shared + kQ, *sk = shared + kK, *sI = shared + kI;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk;
    const int64_t at = chunk * kChunk * D, at_c = chunk * kChunk;

    ex.load(sq, kLd, q + at, D, kChunk, D);
    ex.load(sk, kLd, k + at, D, kChunk, D);
    ex.decays(g + at_c, cum, e, f);
    ex.sync();
    const Term qk{sq, kLd, false, sk, kLd, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &qk, 1, sI, kChunkLd, 0.0f);
    ex.for_each(kChunk * D, [&](int x) { Qd[at + x] = sq[(x / D) * kLd + x % D] * e[x / D]; });
    ex.for_each(kChunk * D, [&](int x) { Kend[at + x] = sk[(x / D) * kLd + x % D] * f[x / D]; });
    ex.sync();
    float* out = intra + chunk * kChunk * kChunk;
    ex.for_each(kChunk * kChunk, [&](int x) {
      const int i = x / kChunk, j = x % kChunk;
      out[x] = sI[i * kChunkLd + j] * pair_decay(cum, i, j);
    });
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The forward scan: one block per sequence and block of BV value columns (the columns of S are independent), the
// chunks in order. Writes V and every chunk's starting state. Two phases a chunk, each loading what the other
// needs next: V = U − W S while Kend comes in, S ← dec S + Kendᵀ V while the next chunk's W, U and g do (U in the
// other of two buffers: the second phase still reads this chunk's V).
template <int D, int BV>
struct ScanForward {
  static_assert(kShapesFit<D, BV>, "head size and scan block: multiples of 16, the block dividing the head");
  static constexpr int kThreads = 256;
  // S and V: B operands and accumulators; W: the A of W S; Kend: the transposed A of Kendᵀ V
  static constexpr int kLdS = col_ld(BV), kLdW = row_ld(D), kLdK = col_ld(D);
  static constexpr int64_t kVStride = region(kChunk * kLdS);  // between the two V buffers
  static constexpr int64_t kS = 0, kV = kS + region(D * kLdS), kW = kV + 2 * kVStride,
                           kK = kW + region(kChunk * kLdW), kG = kK + region(kChunk * kLdK), kVectors = kG + kChunk,
                           kSharedFloats = kVectors + 3 * kChunk;

  const float *U, *W, *Kend, *g;
  float *V, *states;
  int N;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t block) const {
    float *sS = shared + kS, *sW = shared + kW, *sK = shared + kK, *sg = shared + kG;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk;
    const int64_t sequence = block / (D / BV);
    const int col = static_cast<int>(block % (D / BV)) * BV;
    const auto sV = [&](int n) { return shared + kV + (n & 1) * kVStride; };
    const auto load_next = [&](int n) {  // chunk n's W, U and g
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      ex.load(sW, kLdW, W + at, D, kChunk, D);
      ex.load(sV(n), kLdS, U + at + col, D, kChunk, BV);
      ex.load(sg, kChunk, g + chunk * kChunk, kChunk, 1, kChunk);
    };

    load_next(0);
    ex.for_each(D * BV, [&](int x) { sS[(x / BV) * kLdS + x % BV] = 0.0f; });
    ex.sync();
    for (int n = 0; n < N; ++n) {
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      if (n + 1 < N) ex.load(sK, kLdK, Kend + at, D, kChunk, D);
      ex.copy(states + chunk * D * D + col, D, sS, kLdS, D, BV);
      ex.decays(sg, cum, e, f);
      const Term ws{sW, kLdW, false, sS, kLdS, false, D, -1.0f};
      ex.mm(kChunk, BV, &ws, 1, sV(n), kLdS, 1.0f);  // V = U − W S
      ex.sync();
      if (n + 1 < N) load_next(n + 1);
      ex.copy(V + at + col, D, sV(n), kLdS, kChunk, BV);
      if (n + 1 == N) break;
      const Term kv{sK, kLdK, true, sV(n), kLdS, false, kChunk, 1.0f};
      ex.mm(D, BV, &kv, 1, sS, kLdS, e[kChunk - 1]);  // S ← dec S + Kendᵀ V
      ex.sync();
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The output (one block per chunk): O = Qd S_n + intra V, every operand loaded at once.
template <int D>
struct Output {
  static_assert(kShapesFit<D>, "head size: a multiple of 16");
  static constexpr int kThreads = 512;
  // q: the A of q kᵀ and Qd S; k: a transposed B; S and V: the B operands of the output's two products
  static constexpr int kLd = row_ld(D), kLdB = col_ld(D);
  static constexpr int64_t kQ = 0, kK = kQ + region(kChunk * kLd), kV = kK + region(kChunk * kLd),
                           kI = kV + region(kChunk * kLdB), kS = kI + region(kChunk * kChunkLd),
                           kVectors = kS + region(D * kLdB), kSharedFloats = kVectors + 3 * kChunk;

  const float *q, *k, *g, *V, *states;
  float* O;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    float *sq = shared + kQ, *sk = shared + kK, *sV = shared + kV, *sI = shared + kI, *sS = shared + kS;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk;
    const int64_t at = chunk * kChunk * D;

    ex.load(sq, kLd, q + at, D, kChunk, D);
    ex.load(sk, kLd, k + at, D, kChunk, D);
    ex.load(sS, kLdB, states + chunk * D * D, D, D, D);
    ex.load(sV, kLdB, V + at, D, kChunk, D);
    ex.decays(g + chunk * kChunk, cum, e, f);
    ex.template sync_all_but<2>();  // q and k: q kᵀ and its decays run while S_n and V land
    const Term qk{sq, kLd, false, sk, kLd, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &qk, 1, sI, kChunkLd, 0.0f);
    ex.template sync_all_but<2>();  // a barrier only: S_n and V still in flight
    ex.for_each(kChunk * kChunk, [&](int x) {
      const int i = x / kChunk, j = x % kChunk;
      sI[i * kChunkLd + j] *= pair_decay(cum, i, j);
    });
    ex.for_each(kChunk * D, [&](int x) { sq[(x / D) * kLd + x % D] *= e[x / D]; });  // Qd
    ex.sync();
    const Term terms[2] = {{sq, kLd, false, sS, kLdB, false, D, 1.0f}, {sI, kChunkLd, false, sV, kLdB, false, kChunk, 1.0f}};
    ex.mm(kChunk, D, terms, 2, O + at, D, 0.0f);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The backward scan: one block per sequence and block of BV value columns, the chunks in reverse. Writes dV and
// the gradient of every chunk's end state (dS_next). Two phases a chunk as in the forward scan: dV = Kend dS +
// intraᵀ dO while Qd and W come in, dS ← dec dS + Qdᵀ dO − Wᵀ dV while the previous chunk's Kend, intra, dO
// (the other buffer) and g do.
template <int D, int BV>
struct ScanBackward {
  static_assert(kShapesFit<D, BV>, "head size and scan block: multiples of 16, the block dividing the head");
  static constexpr int kThreads = 256;
  // dS, dO and dV: B operands and accumulators; Kend: the A of Kend dS; Qd, W and intra: transposed A operands
  static constexpr int kLdS = col_ld(BV), kLdK = row_ld(D), kLdT = col_ld(D), kLdI = col_ld(kChunk);
  static constexpr int64_t kdOStride = region(kChunk * kLdS);  // between the two dO buffers
  static constexpr int64_t kdS = 0, kdO = kdS + region(D * kLdS), kdV = kdO + 2 * kdOStride,
                           kK = kdV + region(kChunk * kLdS), kQ = kK + region(kChunk * kLdK),
                           kW = kQ + region(kChunk * kLdT), kI = kW + region(kChunk * kLdT),
                           kG = kI + region(kChunk * kLdI), kVectors = kG + kChunk,
                           kSharedFloats = kVectors + 3 * kChunk;

  const float *Kend, *Qd, *W, *intra, *g, *dO;
  float *dV, *dS_next;
  int N;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t block) const {
    float *sdS = shared + kdS, *sdV = shared + kdV, *sK = shared + kK, *sQ = shared + kQ, *sW = shared + kW;
    float *sI = shared + kI, *sg = shared + kG;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk;
    const int64_t sequence = block / (D / BV);
    const int col = static_cast<int>(block % (D / BV)) * BV;
    const auto sdO = [&](int n) { return shared + kdO + (n & 1) * kdOStride; };
    const auto load_previous = [&](int n) {  // chunk n's Kend, intra, dO and g
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      ex.load(sK, kLdK, Kend + at, D, kChunk, D);
      ex.load(sI, kLdI, intra + chunk * kChunk * kChunk, kChunk, kChunk, kChunk);
      ex.load(sdO(n), kLdS, dO + at + col, D, kChunk, BV);
      ex.load(sg, kChunk, g + chunk * kChunk, kChunk, 1, kChunk);
    };

    load_previous(N - 1);
    ex.for_each(D * BV, [&](int x) { sdS[(x / BV) * kLdS + x % BV] = 0.0f; });
    ex.sync();
    for (int n = N - 1; n >= 0; --n) {
      const int64_t chunk = sequence * N + n, at = chunk * kChunk * D;
      if (n > 0) {
        ex.load(sQ, kLdT, Qd + at, D, kChunk, D);
        ex.load(sW, kLdT, W + at, D, kChunk, D);
      }
      ex.copy(dS_next + chunk * D * D + col, D, sdS, kLdS, D, BV);
      ex.decays(sg, cum, e, f);
      const Term dv[2] = {{sK, kLdK, false, sdS, kLdS, false, D, 1.0f},
                          {sI, kLdI, true, sdO(n), kLdS, false, kChunk, 1.0f}};
      ex.mm(kChunk, BV, dv, 2, sdV, kLdS, 0.0f);  // dV = Kend dS + intraᵀ dO
      ex.sync();
      if (n > 0) load_previous(n - 1);
      ex.copy(dV + at + col, D, sdV, kLdS, kChunk, BV);
      if (n == 0) break;
      const Term ds[2] = {{sQ, kLdT, true, sdO(n), kLdS, false, kChunk, 1.0f}, {sW, kLdT, true, sdV, kLdS, false, kChunk, -1.0f}};
      ex.mm(D, BV, ds, 2, sdS, kLdS, e[kChunk - 1]);  // dS ← dec dS + Qdᵀ dO − Wᵀ dV
      ex.sync();
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The gradients that go through the states (one block per chunk): dKend, dQd, dW, dintra and ddec. The loads are
// staged so that each phase waits for its own operands only: V = U − W S_n starts when S_n, W and U are in, while
// dO and dV come; the state gradient dS comes in two parts by rows, into W's rows once V is made and into dV's once
// dW is, and dKend = V dSᵀ takes its columns in the same two parts (column j reads dS's row j), the first while
// the second part of dS lands.
template <int D>
struct StateGrads {
  static_assert(kShapesFit<D>, "head size: a multiple of 16");
  static constexpr int kThreads = 512;
  static constexpr int kLd = row_ld(D);
  static constexpr int kRowsM = 2 * kChunk > D ? 2 * kChunk : D;
  // dS's rows that go into W's place (its 64 rows: all of dS for D ≤ 64), and the rest into dV's
  static constexpr int kTop = D < kChunk ? D : kChunk, kBottom = D - kTop;
  // S: S_n. M: W on top of dV, then dS. V: U, then V.
  static constexpr int64_t kS = 0, kM = kS + region(D * kLd), kV = kM + region(kRowsM * kLd),
                           kdO = kV + region(kChunk * kLd), kSharedFloats = kdO + region(kChunk * kLd);

  const float *U, *W, *states, *dS_next, *dO, *dV;
  float *dKend, *dQd, *dW, *dintra, *ddec;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    float *sS = shared + kS, *sM = shared + kM, *sV = shared + kV, *sdO = shared + kdO;
    float* sdV = sM + kChunk * kLd;
    const int64_t at = chunk * kChunk * D;
    const float* dS = dS_next + chunk * D * D;

    ex.load(sS, kLd, states + chunk * D * D, D, D, D);
    ex.load(sM, kLd, W + at, D, kChunk, D);
    ex.load(sV, kLd, U + at, D, kChunk, D);
    ex.load(sdO, kLd, dO + at, D, kChunk, D);
    ex.load(sdV, kLd, dV + at, D, kChunk, D);
    ex.template sync_all_but<2>();  // S_n, W, U
    const Term ws{sM, kLd, false, sS, kLd, false, D, -1.0f};
    ex.mm(kChunk, D, &ws, 1, sV, kLd, 1.0f);  // V = U − W S_n
    ex.sync();
    ex.load(sM, kLd, dS, D, kTop, D);  // W is used up
    const Term os{sdO, kLd, false, sS, kLd, true, D, 1.0f};
    ex.mm(kChunk, D, &os, 1, dQd + at, D, 0.0f);  // dQd = dO S_nᵀ
    const Term vs{sdV, kLd, false, sS, kLd, true, D, -1.0f};
    ex.mm(kChunk, D, &vs, 1, dW + at, D, 0.0f);  // dW = −dV S_nᵀ
    const Term ov{sdO, kLd, false, sV, kLd, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &ov, 1, dintra + chunk * kChunk * kChunk, kChunk, 0.0f);  // dintra = dO Vᵀ
    ex.sync();
    if constexpr (kBottom > 0) ex.load(sdV, kLd, dS + kTop * D, D, kBottom, D);  // dV is used up
    const Term top{sV, kLd, false, sM, kLd, true, D, 1.0f};
    ex.mm(kChunk, kTop, &top, 1, dKend + at, D, 0.0f);  // dKend's first columns: V dS[:kTop]ᵀ
    ex.sync();
    if constexpr (kBottom > 0) {
      const Term bottom{sV, kLd, false, sdV, kLd, true, D, 1.0f};
      ex.mm(kChunk, kBottom, &bottom, 1, dKend + at + kTop, D, 0.0f);  // and the rest
    }
    const float dot = ex.sum(D * D, [&](int x) { return sS[(x / D) * kLd + x % D] * sM[(x / D) * kLd + x % D]; });
    ex.single([&] { ddec[chunk] = dot; });  // ⟨S_n, dS⟩
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The gradients inside a chunk (one block per chunk): through the transposed solve, a product with the inverse the
// forward kept, and the chunk terms back to q, k, v, β and g.
template <int D>
struct IntraGrads {
  static_assert(kShapesFit<D>, "head size: a multiple of 16");
  static constexpr int kThreads = 512;
  // k: mostly the B of dKK k, dQKᵀ… and dQK k; R: Tᵀ [dV | dW]'s accumulator, q's B, dkb's and grad_q's
  // accumulator; M1-M3: accumulators and transposed A operands (column strides, col_ld); X and Y: row strides,
  // but for dV and dW, the B of Tᵀ [dV | dW] (column strides: the regions are sized for those)
  static constexpr int ld = row_ld(D), ldB = col_ld(D), ldK = col_ld(D), ldR = col_ld(2 * D), ldM = col_ld(kChunk);
  // R: [dV | dW], then [dv·β | dk·β·e]; then q on the left, and on the right dk·β = dkb, then grad_q.
  // X: dV, v, W, then dKend, summed into grad_k. Y: dW, U, intra (ld kChunkLd: wider than D's rows below D = 64),
  // then dQd. M1: k kᵀ, A, then d log P. M2: T, dA, then dKK = dA ⊙ P (rows scaled by β for grad_k). M3: dintra,
  // then dQK = dintra ⊙ P.
  // Vectors: cum, e, f, β, Σ dvb ⊙ v, Σ dkb ⊙ k, Σ dkbe ⊙ k, Σ dQd ⊙ q, Σ dKend ⊙ k, d log P's row and column
  // sums, ddec (one float of the last).
  static constexpr int64_t kK = 0, kR = kK + region(kChunk * ldK), kX = kR + region(kChunk * ldR),
                           kY = kX + region(kChunk * ldB), kM1 = kY + region(kChunk * (ldB > kChunkLd ? ldB : kChunkLd)),
                           kM2 = kM1 + region(kChunk * ldM), kM3 = kM2 + region(kChunk * ldM),
                           kVectors = kM3 + region(kChunk * ldM), kSharedFloats = kVectors + 12 * kChunk;

  const float *q, *k, *v, *beta, *g, *U, *W, *T, *intra, *dV, *dW, *dKend, *dQd, *dintra, *ddec;
  float *grad_q, *grad_k, *grad_v, *grad_beta, *grad_g;

  template <class Exec>
  RLLOOP_BLOCK_FN void run(const Exec& ex, float* shared, int64_t chunk) const {
    float *sk = shared + kK, *sR = shared + kR, *sX = shared + kX, *sY = shared + kY;
    float *M1 = shared + kM1, *M2 = shared + kM2, *M3 = shared + kM3;
    float *cum = shared + kVectors, *e = cum + kChunk, *f = e + kChunk, *sbeta = f + kChunk;
    float *beta_v = sbeta + kChunk, *beta_k = beta_v + kChunk, *de_k = beta_k + kChunk, *de_q = de_k + kChunk;
    float *df = de_q + kChunk, *rows = df + kChunk, *cols = rows + kChunk, *sddec = cols + kChunk;
    const int64_t at = chunk * kChunk * D, at_c = chunk * kChunk, at_m = chunk * kChunk * kChunk;
    float* sdkb = sR + D;  // the right half of R
    float* sq = sR;        // the left half, once dv·β is used up
    const auto X = [&](float* m, int ldm, int x) -> float& { return m[(x / D) * ldm + x % D]; };  // element x of 64 x D

    // k and β first: k kᵀ and A run while T, dV and dW land; each later phase loads into what the one before used
    // up, and waits only for what it reads.
    ex.load(sk, ldK, k + at, D, kChunk, D);
    ex.load(sbeta, kChunk, beta + at_c, kChunk, 1, kChunk);
    ex.load(M2, ldM, T + at_m, kChunk, kChunk, kChunk);
    ex.load(sX, ldB, dV + at, D, kChunk, D);
    ex.load(sY, ldB, dW + at, D, kChunk, D);
    ex.load(M3, ldM, dintra + at_m, kChunk, kChunk, kChunk);
    ex.single([&] { *sddec = ddec[chunk]; });
    ex.decays(g + at_c, cum, e, f);
    ex.template sync_all_but<4>();  // k, β
    const Term kk{sk, ldK, false, sk, ldK, true, D, 1.0f};
    ex.mm(kChunk, kChunk, &kk, 1, M1, ldM, 0.0f);
    ex.template sync_all_but<1>();  // T, dV, dW
    ex.for_each(kChunk * kChunk, [&](int x) {  // A, strictly lower
      const int i = x / kChunk, j = x % kChunk;
      M1[i * ldM + j] = j < i ? sbeta[i] * M1[i * ldM + j] * expf(cum[i] - cum[j]) : 0.0f;
    });
    ex.for_each(kChunk * D, [&](int x) { X(sR, ldR, x) = X(sX, ldB, x); });
    ex.for_each(kChunk * D, [&](int x) { X(sdkb, ldR, x) = X(sY, ldB, x); });
    ex.template sync_all_but<1>();  // a barrier only: dintra may still be in flight
    // [dv·β | dk·β·e] = (I + SL(A))⁻ᵀ [dV | dW] = [dV | dW] + Tᵀ [dV | dW]
    const Term tdv{M2, ldM, true, sX, ldB, false, kChunk, 1.0f}, tdw{M2, ldM, true, sY, ldB, false, kChunk, 1.0f};
    ex.mm(kChunk, D, &tdv, 1, sR, ldR, 1.0f);
    ex.mm(kChunk, D, &tdw, 1, sdkb, ldR, 1.0f);
    ex.template sync_all_but<1>();  // a barrier only
    ex.load(sX, ld, v + at, D, kChunk, D);  // dV and dW are used up
    ex.load(sY, ld, U + at, D, kChunk, D);
    ex.for_each(kChunk * D, [&](int x) { grad_v[at + x] = X(sR, ldR, x) * sbeta[x / D]; });
    ex.row_sums(kChunk, D, de_k, [&](int r, int c) { return sR[r * ldR + D + c] * sk[r * ldK + c]; });
    ex.template sync_all_but<1>();  // dintra, v
    ex.row_sums(kChunk, D, beta_v, [&](int r, int c) { return sR[r * ldR + c] * sX[r * ld + c]; });
    ex.sync();  // U
    ex.load(sX, ld, W + at, D, kChunk, D);  // v is used up
    const Term ru{sR, ldR, false, sY, ld, true, D, -1.0f};
    ex.mm(kChunk, kChunk, &ru, 1, M2, ldM, 0.0f);  // dA = −(dvb Uᵀ + dkbe Wᵀ), masked below; T is used up
    ex.template sync_all_but<1>();  // a barrier only: W may still be in flight
    ex.load(sY, kChunkLd, intra + at_m, kChunk, kChunk, kChunk);  // U is used up
    ex.load(sq, ldR, q + at, D, kChunk, D);                       // dv·β is used up
    ex.template sync_all_but<2>();  // W
    const Term rw{sR + D, ldR, false, sX, ld, true, D, -1.0f};
    ex.mm(kChunk, kChunk, &rw, 1, M2, ldM, 1.0f);
    ex.sync();
    ex.load(sX, ld, dKend + at, D, kChunk, D);  // W is used up
    ex.for_each(kChunk * kChunk, [&](int x) {
      const int i = x / kChunk, j = x % kChunk;
      const float dA = j < i ? M2[i * ldM + j] : 0.0f;
      const float p = pair_decay(cum, i, j), di = M3[i * ldM + j];
      M1[i * ldM + j] = dA * M1[i * ldM + j] + di * sY[i * kChunkLd + j];  // d log P = dA ⊙ A + dintra ⊙ intra
      M2[i * ldM + j] = dA * p;                                            // dKK
      M3[i * ldM + j] = di * p;                                            // dQK
    });
    ex.for_each(kChunk * D, [&](int x) { X(sdkb, ldR, x) *= e[x / D]; });  // dkbe ⊙ e
    ex.sync();
    ex.load(sY, ld, dQd + at, D, kChunk, D);  // intra is used up
    ex.row_sums(kChunk, kChunk, rows, [&](int r, int c) { return M1[r * ldM + c]; });
    ex.row_sums(kChunk, kChunk, cols, [&](int r, int c) { return M1[c * ldM + r]; });
    const Term kkb{M2, ldM, false, sk, ldK, false, kChunk, 1.0f};
    ex.mm(kChunk, D, &kkb, 1, sdkb, ldR, 1.0f);  // dkb = dkbe ⊙ e + dKK k
    ex.row_sums(kChunk, D, df, [&](int r, int c) { return sX[r * ld + c] * sk[r * ldK + c]; });
    ex.sync();
    ex.row_sums(kChunk, D, beta_k, [&](int r, int c) { return sdkb[r * ldR + c] * sk[r * ldK + c]; });
    ex.for_each(kChunk * D, [&](int x) { X(sX, ld, x) = X(sX, ld, x) * f[x / D] + X(sdkb, ldR, x) * sbeta[x / D]; });
    ex.for_each(kChunk * kChunk, [&](int x) { M2[(x / kChunk) * ldM + x % kChunk] *= sbeta[x / kChunk]; });
    ex.sync();
    // grad_k = dKend ⊙ f + dkb ⊙ β + dKKᵀ (k·β) + dQKᵀ q, the β of k·β moved onto dKK's rows
    const Term gk[2] = {{M2, ldM, true, sk, ldK, false, kChunk, 1.0f}, {M3, ldM, true, sq, ldR, false, kChunk, 1.0f}};
    ex.mm(kChunk, D, gk, 2, sX, ld, 1.0f);
    ex.row_sums(kChunk, D, de_q, [&](int r, int c) { return sY[r * ld + c] * sq[r * ldR + c]; });
    ex.for_each(kChunk, [&](int i) { grad_beta[at_c + i] = beta_v[i] + beta_k[i]; });
    ex.for_each(kChunk * D, [&](int x) { X(sdkb, ldR, x) = X(sY, ld, x) * e[x / D]; });  // grad_q starts as dQd ⊙ e
    ex.sync();
    ex.copy(grad_k + at, D, sX, ld, kChunk, D);
    ex.single([&] {  // g: through P (rows +, columns −), e, f and dec, then cum = cumsum(g) backwards
      float carry = 0.0f, tail = *sddec * e[kChunk - 1];
      for (int i = 0; i < kChunk; ++i) tail += df[i] * f[i];
      for (int i = kChunk - 1; i >= 0; --i) {
        float d = rows[i] - cols[i] + (sbeta[i] * de_k[i] + de_q[i]) * e[i] - df[i] * f[i];
        if (i == kChunk - 1) d += tail;
        carry += d;
        grad_g[at_c + i] = carry;
      }
    });
    const Term qk{M3, ldM, false, sk, ldK, false, kChunk, 1.0f};
    ex.mm(kChunk, D, &qk, 1, sdkb, ldR, 1.0f);  // grad_q = dQd ⊙ e + dQK k
    ex.sync();
    ex.copy(grad_q + at, D, sdkb, ldR, kChunk, D);
  }
};

}  // namespace rlloop::delta_rule
