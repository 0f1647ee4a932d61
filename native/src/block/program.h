// Block programs: GPU kernels written once as "what one thread block does", over an executor that is either the
// block's CUDA threads (block/exec_cuda.cuh) or a plain sequential loop on the CPU (block/exec_cpu.h). The CPU
// executor exists so the kernels' arithmetic, indexing and shared-memory layout run in the CPU test suite (this
// project's CI has no GPU); only the executor's primitives differ between the two.
//
// A program is a struct with the kernel's arguments, its thread count and shared memory (kThreads, kSharedFloats:
// compile-time, like every dimension, so index arithmetic folds into shifts) and
//   template <class Exec> void run(const Exec& ex, float* shared, int64_t block) const
// written bulk-synchronously: phases of data-parallel work separated by barriers (ex.sync, ex.sync_all_but). The
// executor gives
//   ex.for_each(n, f)          f(i) for every i in [0, n), spread over the threads, in no order
//   ex.sync()                  barrier: every shared write before it is visible to every read after it
//   ex.sync_all_but<n>()       the same, but the n most recently issued loads that are still pending (all of them
//                              if fewer) stay in flight, their regions still neither read nor written: a phase
//                              starts on what its first loads bring while later phases' operands come in. The
//                              GPU counts loads per thread, so every thread must issue every load (loads in
//                              block-uniform control flow); the CPU executor cannot tell if one does not
//   ex.single(f)               f() on one thread
//   ex.decays(g, cum, e, f)    the chunk's decays from its 64 log-decays g: cum = cumsum(g), e = exp(cum),
//                              f = exp(cum_last - cum)
//   ex.row_sums(rows, cols, out, f)   out[r] = Σ_c f(r, c)
//   ex.sum(n, f)               Σ_i f(i), returned on every thread (barriers inside, but programs still end the
//                              phase with ex.sync() before writing what the phase read: the CPU executor has none)
//   ex.copy(dst, ldd, src, lds, rows, cols)   a rows x cols block (cols, ld and pointers in whole float4s), done
//                              when it returns: shared memory to global memory
//   ex.load(dst, ldd, src, lds, rows, cols)   the same from global memory into shared memory, asynchronous: it
//                              lands by the next ex.sync() (or ex.sync_all_but<n>() that does not leave it in
//                              flight), and until then dst must be neither read nor written (the CPU executor
//                              fills it with NaN when issued and copies when it lands, so a program
//                              that breaks this fails the tests). A phase's loads come first in it, and a load
//                              into a region whose old content the phase still reads is a race.
//   ex.mm(M, N, terms, count, C, ldc, beta)   C = beta·C + Σ alpha·op(A)·op(B) (M, N multiples of 16, K of 8;
//                              every matrix 32-byte aligned with a leading dimension in whole float4s, as the
//                              tensor cores' tile loads need; A and B in shared memory: the CUDA executor reads them
//                              with shared-memory instructions, and a global address there reads garbage; beta = 0
//                              does not read C; C must not overlap an operand)
//   ex.solve16(A, lda, X, ldx, cols)   X ← (I + SL(A))⁻¹ X for 16 rows (SL: the strictly lower part of A's 16 x 16
//                              block)
// Nothing but ex.sum and ex.sync(_all_but) synchronises: a phase may only read what an earlier phase wrote. Only
// ex.sync(_all_but) completes loads (ex.sum's barriers do not).
//
// Why loads are asynchronous: these kernels run one or two blocks an SM, and a synchronous copy or an elementwise
// pass over global memory has a thread wait for each of its loads in turn (the compiler cannot move a load above
// an earlier store it cannot prove apart), so a block kept ~1-2 loads a thread in flight and waited on memory
// latency, not bandwidth. An asynchronous load puts all of a region's bytes in flight at once and lets the
// phase's arithmetic run meanwhile; programs read global memory through loads into shared memory only, save a few
// scalars a chunk.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define RLLOOP_HOST_DEVICE __host__ __device__
#define RLLOOP_BLOCK_FN __device__
#else
#define RLLOOP_HOST_DEVICE
#define RLLOOP_BLOCK_FN
#endif

namespace rlloop::block {

// alpha · op(A) · op(B), op = transpose when the flag is set; A (or Aᵀ) and B (or Bᵀ) row-major with the given
// leading dimensions, K the inner dimension.
struct Term {
  const float* a;
  int lda;
  bool transpose_a;
  const float* b;
  int ldb;
  bool transpose_b;
  int k;
  float alpha;
};

// One element of C = beta·C + Σ alpha·op(A)·op(B) in float32, each term's sum in k order: the CPU executor's
// product, and the CUDA executor's when TF32 is off (float32 models; nvcc may fuse the multiply-adds, so the two
// can differ in the last bit).
RLLOOP_HOST_DEVICE inline float product_element(int m, int n, const Term* terms, int count, const float* C, int ldc,
                                                float beta) {
  float acc = beta != 0.0f ? beta * C[m * ldc + n] : 0.0f;
  for (int t = 0; t < count; ++t) {
    const Term& x = terms[t];
    float p = 0.0f;
    for (int k = 0; k < x.k; ++k) {
      const float a = x.transpose_a ? x.a[k * x.lda + m] : x.a[m * x.lda + k];
      const float b = x.transpose_b ? x.b[n * x.ldb + k] : x.b[k * x.ldb + n];
      p += a * b;
    }
    acc += x.alpha * p;
  }
  return acc;
}

// A region of a block's shared memory, rounded up to 32 floats (128 bytes: aligned for 16-byte vector moves and
// the tensor-core tile loads, which need 32).
constexpr int64_t region(int64_t floats) { return (floats + 31) / 32 * 32; }

}  // namespace rlloop::block
