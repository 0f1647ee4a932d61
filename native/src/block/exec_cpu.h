// The block programs' CPU executor (block/program.h): every primitive is a sequential loop, blocks run in
// parallel over ATen's thread pool, and each block's shared memory starts as NaN, so a read of anything a program
// did not write first poisons its outputs. Loads are deferred to the barrier that lands them (sync, or
// sync_all_but for all but the last few) and their destination is NaN until then, as asynchronous as the GPU's
// may be. Used by the tests; far slower than the ATen formulations on a real CPU workload.
#pragma once
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "block/program.h"

namespace rlloop::block {

class CpuBlock {
 public:
  template <class F>
  void for_each(int n, F&& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  void sync() const {
    for (const Load& l : pending_) copy(l.dst, l.ldd, l.src, l.lds, l.rows, l.cols);
    pending_.clear();
  }
  template <int Pending>
  void sync_all_but() const {
    static_assert(Pending >= 0, "a count of loads");
    const std::size_t land = pending_.size() > Pending ? pending_.size() - Pending : 0;
    for (std::size_t i = 0; i < land; ++i) copy(pending_[i].dst, pending_[i].ldd, pending_[i].src, pending_[i].lds,
                                                pending_[i].rows, pending_[i].cols);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(land));
  }
  bool loads_pending() const { return !pending_.empty(); }
  template <class F>
  void single(F&& f) const {
    f();
  }

  void decays(const float* g, float* cum, float* e, float* f) const {
    constexpr int kChunk = 64;
    float running = 0.0f;
    for (int i = 0; i < kChunk; ++i) cum[i] = running += g[i];
    for (int i = 0; i < kChunk; ++i) {
      e[i] = std::exp(cum[i]);
      f[i] = std::exp(cum[kChunk - 1] - cum[i]);
    }
  }

  template <class F>
  void row_sums(int rows, int cols, float* out, F&& f) const {
    for (int r = 0; r < rows; ++r) {
      float s = 0.0f;
      for (int c = 0; c < cols; ++c) s += f(r, c);
      out[r] = s;
    }
  }

  template <class F>
  float sum(int n, F&& f) const {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += f(i);
    return s;
  }

  void copy(float* dst, int ldd, const float* src, int lds, int rows, int cols) const {
    TORCH_INTERNAL_ASSERT(aligned(dst, 16) && aligned(src, 16) && ldd % 4 == 0 && lds % 4 == 0 && cols % 4 == 0,
                          "block copy: rows, leading dimensions and pointers must be whole float4s");
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) dst[r * ldd + c] = src[r * lds + c];
  }

  void load(float* dst, int ldd, const float* src, int lds, int rows, int cols) const {
    for (int r = 0; r < rows; ++r)
      std::fill(dst + r * ldd, dst + r * ldd + cols, std::numeric_limits<float>::quiet_NaN());
    pending_.push_back(Load{dst, ldd, src, lds, rows, cols});
  }

  void mm(int M, int N, const Term* terms, int count, float* C, int ldc, float beta) const {
    TORCH_INTERNAL_ASSERT(M % 16 == 0 && N % 16 == 0, "block mm: M and N must be multiples of 16");
    TORCH_INTERNAL_ASSERT(aligned(C, 32) && ldc % 4 == 0, "block mm: the output must be 32-byte aligned");
    for (int t = 0; t < count; ++t) {
      const Term& x = terms[t];
      TORCH_INTERNAL_ASSERT(x.k % 8 == 0, "block mm: K must be a multiple of 8");
      const int a_rows = x.transpose_a ? x.k : M, a_cols = x.transpose_a ? M : x.k;
      const int b_rows = x.transpose_b ? N : x.k, b_cols = x.transpose_b ? x.k : N;
      TORCH_INTERNAL_ASSERT(aligned(x.a, 32) && aligned(x.b, 32) && x.lda % 4 == 0 && x.ldb % 4 == 0,
                            "block mm: operands must be 32-byte aligned with leading dimensions in float4s");
      TORCH_INTERNAL_ASSERT(!overlaps(C, ldc, M, N, x.a, x.lda, a_rows, a_cols) &&
                                !overlaps(C, ldc, M, N, x.b, x.ldb, b_rows, b_cols),
                            "block mm: the output overlaps an operand");
    }
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) C[m * ldc + n] = product_element(m, n, terms, count, C, ldc, beta);
  }

  void solve16(const float* A, int lda, float* X, int ldx, int cols) const {
    constexpr int kRows = 16;
    for (int c = 0; c < cols; ++c)
      for (int i = 1; i < kRows; ++i) {
        float s = X[i * ldx + c];
        for (int j = 0; j < i; ++j) s -= A[i * lda + j] * X[j * ldx + c];
        X[i * ldx + c] = s;
      }
  }

 private:
  struct Load {
    float* dst;
    int ldd;
    const float* src;
    int lds, rows, cols;
  };
  // The loads issued and not landed yet, in issue order (programs take the executor as const, as the CUDA one is
  // stateless).
  mutable std::vector<Load> pending_;

  static bool aligned(const float* p, int bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

  // Whether two row-major blocks' address spans overlap: conservative where two matrices interleave their rows
  // (the halves of one wide buffer), which can only raise a false alarm, never miss a real overlap.
  static bool overlaps(const float* p, int ldp, int rows_p, int cols_p, const float* q, int ldq, int rows_q, int cols_q) {
    const float* p_end = p + (rows_p - 1) * static_cast<int64_t>(ldp) + cols_p;
    const float* q_end = q + (rows_q - 1) * static_cast<int64_t>(ldq) + cols_q;
    return p < q_end && q < p_end;
  }
};

// Runs program.run on every block, blocks in parallel, each with its own NaN-filled shared memory.
template <class Program>
void run_on_cpu(const Program& program, int64_t blocks) {
  constexpr size_t kAlign = 32;  // floats: 128 bytes, as CUDA's dynamic shared memory
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> storage(static_cast<size_t>(Program::kSharedFloats) + kAlign);
    float* shared = storage.data();
    while (reinterpret_cast<std::uintptr_t>(shared) % (kAlign * sizeof(float)) != 0) ++shared;
    const CpuBlock ex;
    for (int64_t b = begin; b < end; ++b) {
      std::fill(shared, shared + Program::kSharedFloats, std::numeric_limits<float>::quiet_NaN());
      program.run(ex, shared, b);
      TORCH_INTERNAL_ASSERT(!ex.loads_pending(), "block program: a load that no sync completed");
    }
  });
}

}  // namespace rlloop::block
