// The block programs' CUDA executor (block/program.h): the program's thread count a block; matrix products on the
// tensor cores in TF32 (PTX mma.sync from shared memory, block/tf32_mma.cuh; a warp taking a unit of up to 2 x 2
// tiles of 16 x 16 that share their fragments, float32 accumulators) or, for float32 models, exact float32 on the
// SIMT cores; the 16-row solves one column a thread in registers; reductions over warps. Everything is inlined into the program, so its
// compile-time shapes fold into the index arithmetic.
#pragma once
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "block/program.h"
#include "block/tf32_mma.cuh"
#include "kernels/device_helpers.cuh"

namespace rlloop::block {

template <bool kTf32, int kBlockThreads>
class CudaBlock {
  static constexpr int kBlockWarps = kBlockThreads / cuda::kWarp;

 public:
  template <class F>
  __device__ __forceinline__ void for_each(int n, F&& f) const {
    for (int i = threadIdx.x; i < n; i += kBlockThreads) f(i);
  }
  // The thread's own asynchronous loads first (cp.async completes per thread), then the barrier that makes every
  // thread's writes, those loads included, visible to all.
  __device__ __forceinline__ void sync() const {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
  }
  // The same, leaving the Pending loads issued last in flight: each load is one commit group, and every thread
  // commits one for each load (an empty group where it copies nothing), so the counts agree across the block.
  template <int Pending>
  __device__ __forceinline__ void sync_all_but() const {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
    __syncthreads();
  }
  template <class F>
  __device__ __forceinline__ void single(F&& f) const {
    if (threadIdx.x == 0) f();
  }

  // One warp: two log-decays a lane, an inclusive scan over the lanes by shuffles.
  __device__ __forceinline__ void decays(const float* g, float* cum, float* e, float* f) const {
    if (threadIdx.x >= cuda::kWarp) return;
    const int lane = threadIdx.x;
    const float a = g[2 * lane], b = g[2 * lane + 1];
    float inclusive = a + b;
#pragma unroll
    for (int offset = 1; offset < cuda::kWarp; offset <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += up;
    }
    const float last = __shfl_sync(0xffffffffu, inclusive, cuda::kWarp - 1);
    const float first = inclusive - b;
    cum[2 * lane] = first;
    cum[2 * lane + 1] = inclusive;
    e[2 * lane] = expf(first);
    e[2 * lane + 1] = expf(inclusive);
    f[2 * lane] = expf(last - first);
    f[2 * lane + 1] = expf(last - inclusive);
  }

  // One warp a row, lanes along the columns.
  template <class F>
  __device__ __forceinline__ void row_sums(int rows, int cols, float* out, F&& f) const {
    const int warp = threadIdx.x / cuda::kWarp, lane = threadIdx.x % cuda::kWarp;
    for (int r = warp; r < rows; r += kBlockWarps) {
      float s = 0.0f;
      for (int c = lane; c < cols; c += cuda::kWarp) s += f(r, c);
      s = cuda::warp_sum(s);
      if (lane == 0) out[r] = s;
    }
  }

  template <class F>
  __device__ __forceinline__ float sum(int n, F&& f) const {
    __shared__ float partial[kBlockWarps];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += kBlockThreads) s += f(i);
    s = cuda::warp_sum(s);
    __syncthreads();  // every thread is past its earlier reads, and a previous sum's partials are consumed
    if (threadIdx.x % cuda::kWarp == 0) partial[threadIdx.x / cuda::kWarp] = s;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kBlockWarps; ++w) total += partial[w];
    return total;
  }

  __device__ __forceinline__ void copy(float* dst, int ldd, const float* src, int lds, int rows, int cols) const {
    const int quads = cols / 4;
    for (int i = threadIdx.x; i < rows * quads; i += kBlockThreads) {
      const int r = i / quads, c = (i % quads) * 4;
      *reinterpret_cast<float4*>(dst + r * ldd + c) = *reinterpret_cast<const float4*>(src + r * lds + c);
    }
  }

  // 16-byte cp.async copies, cached in L2 only (each element is read once a block), one group committed by every
  // thread (empty where it copies nothing); the next sync() waits for them, a sync_all_but<n>() unless they are
  // among the n issued last.
  __device__ __forceinline__ void load(float* dst, int ldd, const float* src, int lds, int rows, int cols) const {
    const int quads = cols / 4;
    for (int i = threadIdx.x; i < rows * quads; i += kBlockThreads) {
      const int r = i / quads, c = (i % quads) * 4;
      const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst + r * ldd + c));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(src + r * lds + c) : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  __device__ __forceinline__ void mm(int M, int N, const Term* terms, int count, float* C, int ldc, float beta) const {
    if constexpr (kTf32) {
      mm_tensor_cores(M, N, terms, count, C, ldc, beta);
    } else {
      for (int x = threadIdx.x; x < M * N; x += kBlockThreads) {
        C[x / N * ldc + x % N] = product_element(x / N, x % N, terms, count, C, ldc, beta);
      }
    }
  }

  // One right-hand-side column a thread, carried through the substitution in registers; A's entries are read by
  // every thread at the same address (shared-memory broadcasts).
  __device__ __forceinline__ void solve16(const float* A, int lda, float* X, int ldx, int cols) const {
    constexpr int kRows = 16;
    for (int c = threadIdx.x; c < cols; c += kBlockThreads) {
      float x[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) x[i] = X[i * ldx + c];
#pragma unroll
      for (int i = 1; i < kRows; ++i) {
        float s = x[i];
#pragma unroll
        for (int j = 0; j < i; ++j) s -= A[i * lda + j] * x[j];
        x[i] = s;
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) X[i * ldx + c] = x[i];
    }
  }

 private:
  using Accumulator = tf32::Accumulator;  // a 16 x 8 tile: a 16 x 16 one is two

  // part[h][r][2s + j] += op(A)[m0 + 16r : +16, k] op(B)[k, n0 + 16s + 8j : +8] over the k-steps k = 8h,
  // 8h + 8·kSplit, …: a warp's unit of kRows x kWidth 16 x 16 tiles, the layouts fixed at compile time. Each k-step
  // loads kRows A and 2·kWidth B fragments for 2·kRows·kWidth products, so a wider unit loads fewer fragments a
  // product; kSplit accumulator sets interleave over k so that consecutive products do not wait on each other's
  // results (the kernels run one or two blocks an SM: too few warps to hide a tensor-core product's latency
  // otherwise).
  template <int kSplit, int kRows, int kWidth, bool kTransposeA, bool kTransposeB>
  __device__ __forceinline__ static void unit_product(Accumulator (&part)[kSplit][kRows][2 * kWidth], const Term& t,
                                                      int m0, int n0, int lane) {
    const tf32::OperandA<kTransposeA> a(t.a, t.lda, m0, lane);
    const tf32::OperandB<kTransposeB> b(t.b, t.ldb, n0, lane);
    tf32::FragmentA fa[kRows];
    tf32::FragmentB fb[kWidth][2];
    for (int k0 = 0; k0 < t.k; k0 += 8 * kSplit) {
#pragma unroll
      for (int h = 0; h < kSplit; ++h) {
        const int k = k0 + 8 * h;
        if (kSplit > 1 && k >= t.k) break;
#pragma unroll
        for (int r = 0; r < kRows; ++r) a.load(fa[r], k, r);
#pragma unroll
        for (int s = 0; s < kWidth; ++s) b.load(fb[s], k, s);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int s = 0; s < kWidth; ++s)
#pragma unroll
            for (int j = 0; j < 2; ++j) tf32::mma(part[h][r][2 * s + j], fa[r], fb[s][j]);
      }
    }
  }

  template <int kSplit, int kRows, int kWidth>
  __device__ __forceinline__ static void term_product(Accumulator (&part)[kSplit][kRows][2 * kWidth], const Term& t,
                                                      int m0, int n0, int lane) {
    if (t.transpose_a) {
      if (t.transpose_b) unit_product<kSplit, kRows, kWidth, true, true>(part, t, m0, n0, lane);
      else unit_product<kSplit, kRows, kWidth, true, false>(part, t, m0, n0, lane);
    } else {
      if (t.transpose_b) unit_product<kSplit, kRows, kWidth, false, true>(part, t, m0, n0, lane);
      else unit_product<kSplit, kRows, kWidth, false, false>(part, t, m0, n0, lane);
    }
  }

  // The output in units of kRows x kWidth 16 x 16 tiles, units spread over the warps.
  template <int kSplit, int kRows, int kWidth>
  __device__ __forceinline__ void mm_units(int M, int N, const Term* terms, int count, float* C, int ldc, float beta) const {
    constexpr int kCols = 2 * kWidth;  // 8-column accumulator tiles a unit row
    const int warp = threadIdx.x / cuda::kWarp, lane = threadIdx.x % cuda::kWarp;
    const int units_n = N / (16 * kWidth), units = (M / (16 * kRows)) * units_n;
    for (int unit = warp; unit < units; unit += kBlockWarps) {
      const int m0 = (unit / units_n) * 16 * kRows, n0 = (unit % units_n) * 16 * kWidth;
      Accumulator acc[kRows][kCols];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          if (beta != 0.0f) {
            tf32::load_accumulator(acc[r][c], C, ldc, m0 + 16 * r, n0 + 8 * c, lane);
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][c].x[i] *= beta;
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][c].x[i] = 0.0f;
          }
        }
      // Unrolled over the terms (count is a constant once the product is inlined into its program): each term's
      // fields become constants, so its layouts are chosen at compile time and its strides fold into the fragment
      // addresses; a loop over the array kept a product's terms in local memory, read back at run time, and a
      // branch over all four layouts (ptxas: 80-160 bytes of stack in the three programs with two-term products).
#pragma unroll
      for (int t = 0; t < count; ++t) {
        Accumulator part[kSplit][kRows][kCols];
#pragma unroll
        for (int h = 0; h < kSplit; ++h)
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int c = 0; c < kCols; ++c)
#pragma unroll
              for (int i = 0; i < 4; ++i) part[h][r][c].x[i] = 0.0f;
        term_product<kSplit, kRows, kWidth>(part, terms[t], m0, n0, lane);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < kCols; ++c)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float p = part[0][r][c].x[i];
#pragma unroll
              for (int h = 1; h < kSplit; ++h) p += part[h][r][c].x[i];
              acc[r][c].x[i] += terms[t].alpha * p;
            }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < kCols; ++c) tf32::store_accumulator(acc[r][c], C, ldc, m0 + 16 * r, n0 + 8 * c, lane);
    }
  }

  // The widest unit that still gives every warp one: 2 x 2 tiles, else strips of two, else single tiles. The
  // narrower units split their k-steps over two accumulator sets (a 2 x 2 unit already has four independent ones).
  // A 2 x 2 unit holds 64 accumulator floats a thread: in a 512-thread program (128 registers at most) only the
  // shapes below 128 x 128 keep it clear of spills — check `cuda-compile-check.sh --ptxas` when a program's shapes change.
  __device__ __forceinline__ void mm_tensor_cores(int M, int N, const Term* terms, int count, float* C, int ldc, float beta) const {
    const int tiles = (M / 16) * (N / 16);
    if (M % 32 == 0 && N % 32 == 0 && tiles >= 4 * kBlockWarps) mm_units<1, 2, 2>(M, N, terms, count, C, ldc, beta);
    else if (N % 32 == 0 && tiles >= 2 * kBlockWarps) mm_units<2, 1, 2>(M, N, terms, count, C, ldc, beta);
    else mm_units<2, 1, 1>(M, N, terms, count, C, ldc, beta);
  }
};

template <class Program, bool kTf32>
__global__ void __launch_bounds__(Program::kThreads) program_kernel(const Program program) {
  extern __shared__ __align__(128) float shared[];
  program.run(CudaBlock<kTf32, Program::kThreads>(), shared, blockIdx.x);
}

// Launches program over `blocks` blocks on the current stream, TF32 products or exact float32 ones.
template <class Program>
void run_on_cuda(const Program& program, int64_t blocks, bool tf32) {
  if (blocks == 0) return;
  constexpr size_t kBytes = static_cast<size_t>(Program::kSharedFloats) * sizeof(float);
  auto stream = at::cuda::getCurrentCUDAStream();
  const auto launch = [&](auto kernel) {
    // Over 48 KiB of dynamic shared memory must be asked for per kernel; cheap, so not cached.
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes)));
    kernel<<<static_cast<unsigned>(blocks), Program::kThreads, kBytes, stream>>>(program);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (tf32) launch(program_kernel<Program, true>);
  else launch(program_kernel<Program, false>);
}

}  // namespace rlloop::block
