#include "kernels/gdn.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <type_traits>

#include "kernels/device_helpers.cuh"

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

// The causal conv kernels: each thread takes eight consecutive channels (one 16-byte pack for bf16,
// kernels/device_helpers.cuh) of one row over a tile of kTile consecutive tokens, walked in order with the last K
// inputs in registers, so each input is read once (plus a K − 1 halo per tile) and the taps once per thread. (The
// first version, a thread per token, read every input K times and the taps once per token: ~7x the memory time.)
// Neighbouring threads take neighbouring channel groups of the same tile, so each load of a warp is one contiguous
// run. x is read through its batch and token strides: the GDN passes its slice of the fused input projection's
// output as it is (a contiguous copy of it took 6.9 ms a 32-row forward at the 9B shapes, and was also what the
// backward kept). Index arithmetic in 32 bits (the launcher checks the sizes); K is a template parameter
// (1..kMaxTaps) so the windows stay in registers.
constexpr int kTile = 16;
constexpr int kMaxTaps = kCausalConvMaxTaps;

// Where token t of row b of x is: x + b·batch + t·token (elements; both multiples of eight).
struct XStrides {
  uint32_t batch;
  uint32_t token;
};

struct ConvThread {
  uint32_t row_start;  // index of token (b, 0) in the contiguous [B·L] outputs
  uint32_t x_row;      // offset of token (b, 0) in x
  uint32_t t0;         // first token of the tile
  uint32_t c0;         // first of the eight channels
};

// This thread's row, tile and channels; false past the last one.
__device__ __forceinline__ bool conv_thread(uint32_t B, uint32_t L, uint32_t C, XStrides xs, ConvThread& ct) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t groups = C / kVec, tiles = (L + kTile - 1) / kTile;
  if (g >= B * tiles * groups) return false;
  const uint32_t group = g % groups, rest = g / groups;
  ct.c0 = group * kVec;
  ct.t0 = (rest % tiles) * kTile;
  const uint32_t b = rest / tiles;
  ct.row_start = b * L;
  ct.x_row = b * xs.batch;
  return true;
}

// The taps of channels c0..c0+7: w is [C, K], so they are K·8 consecutive values (K 16-byte packs).
template <typename T, int K>
__device__ __forceinline__ void load_taps(const T* __restrict__ w, uint32_t c0, T (&taps)[K][kVec]) {
#pragma unroll
  for (int p = 0; p < K; ++p) {
    const Pack<T> v = load_pack(w + c0 * K + p * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int m = p * kVec + i;  // element m of the run = channel m / K, tap m % K
      taps[m % K][m / K] = v.v[i];
    }
  }
}

template <typename T>
__device__ __forceinline__ Pack<T> zero_pack() {
  Pack<T> z;
#pragma unroll
  for (int e = 0; e < kVec; ++e) z.v[e] = static_cast<T>(0.0f);
  return z;
}

// pre[e] = round_T(Σ_j taps[j][e] · window[j][e]), window[K − 1] the current token; taps before the row's start
// hold zeros (a causal conv's left padding), so they add nothing.
template <typename T, int K>
__device__ __forceinline__ void conv_window(const T (&taps)[K][kVec], const Pack<T> (&window)[K], float (&pre)[kVec]) {
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < K; ++j) acc += static_cast<float>(taps[j][e]) * static_cast<float>(window[j].v[e]);
    pre[e] = static_cast<float>(static_cast<T>(acc));
  }
}

// window[1 .. K − 1] = the inputs t0 − K + 1 .. t0 − 1 of the tile's row (zeros before its start: the causal
// conv's left padding); window[0] is shifted out before the first use.
template <typename T>
__device__ __forceinline__ Pack<T> load_input(const T* __restrict__ x, XStrides xs, const ConvThread& ct, uint32_t t) {
  return load_pack(x + ct.x_row + t * xs.token + ct.c0);
}

template <typename T, int K>
__device__ __forceinline__ void load_left_halo(const T* __restrict__ x, XStrides xs, const ConvThread& ct,
                                               Pack<T> (&window)[K]) {
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) {
    const int t = static_cast<int>(ct.t0) - (K - 1) + j;
    window[j + 1] = t >= 0 ? load_input(x, xs, ct, static_cast<uint32_t>(t)) : zero_pack<T>();
  }
}

template <typename P, int K>
__device__ __forceinline__ void shift(P (&window)[K]) {
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) window[j] = window[j + 1];
}

// out = silu(conv(x)) over the thread's tile; kFull: the tile lies inside the row (no bound checks, so the
// compiler may issue the tile's loads ahead of the arithmetic).
template <typename T, int K, bool kFull>
__device__ __forceinline__ void conv_silu_forward_tile(const T* __restrict__ x, XStrides xs,
                                                       const T (&taps)[K][kVec], T* __restrict__ out, uint32_t L,
                                                       uint32_t C, const ConvThread& ct) {
  Pack<T> window[K];  // inputs t − K + 1 .. t
  load_left_halo<T, K>(x, xs, ct, window);
#pragma unroll
  for (int i = 0; i < kTile; ++i) {
    const uint32_t t = ct.t0 + i;
    if (!kFull && t >= L) break;
    shift(window);
    window[K - 1] = load_input(x, xs, ct, t);
    float pre[kVec];
    conv_window<T, K>(taps, window, pre);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(silu(pre[e]));
    store_pack(out + (ct.row_start + t) * C + ct.c0, o);
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kThreads) conv_silu_forward_kernel(const T* __restrict__ x, XStrides xs,
                                                                     const T* __restrict__ w, T* __restrict__ out,
                                                                     uint32_t B, uint32_t L, uint32_t C) {
  ConvThread ct;
  if (!conv_thread(B, L, C, xs, ct)) return;
  T taps[K][kVec];
  load_taps<T, K>(w, ct.c0, taps);
  if (ct.t0 + kTile <= L) conv_silu_forward_tile<T, K, true>(x, xs, taps, out, L, C, ct);
  else conv_silu_forward_tile<T, K, false>(x, xs, taps, out, L, C, ct);
}

// grad_x[t] = Σ_j w[j] · grad_pre[t + K − 1 − j] with grad_pre = silu'(pre) · grad_out rounded to T (autograd's
// SiluBackward output in the model dtype) and pre recomputed from x: grad_pre of tokens t0 .. t0 + kTile + K − 2
// are computed in order (the last K kept), each grad_x as soon as its K inputs are there. float32 accumulation.
// kFull: the tile and its halo lie inside the row.
template <typename T, int K, bool kFull>
__device__ __forceinline__ void conv_silu_backward_tile(const T* __restrict__ grad_out, const T* __restrict__ x,
                                                        XStrides xs, const T (&taps)[K][kVec],
                                                        T* __restrict__ grad_x, uint32_t L, uint32_t C,
                                                        const ConvThread& ct) {
  Pack<T> window[K];    // inputs s − K + 1 .. s
  Pack<T> grad_pre[K];  // grad_pre of s − K + 1 .. s (zero past the row's end)
  load_left_halo<T, K>(x, xs, ct, window);
#pragma unroll
  for (int j = 0; j < K; ++j) grad_pre[j] = zero_pack<T>();  // before t0: never read by this tile's outputs
#pragma unroll
  for (int i = 0; i < kTile + K - 1; ++i) {
    const uint32_t s = ct.t0 + i;
    const uint32_t t = s - (K - 1);  // the output completed by grad_pre[s] (valid from i = K − 1 on)
    if (!kFull && i >= K - 1 && t >= L) break;
    shift(window);
    shift(grad_pre);
    if (kFull || s < L) {
      window[K - 1] = load_input(x, xs, ct, s);
      float pre[kVec];
      conv_window<T, K>(taps, window, pre);
      const Pack<T> go = load_pack(grad_out + (ct.row_start + s) * C + ct.c0);
#pragma unroll
      for (int e = 0; e < kVec; ++e) grad_pre[K - 1].v[e] = static_cast<T>(silu_grad(static_cast<float>(go.v[e]), pre[e]));
    } else {
      grad_pre[K - 1] = zero_pack<T>();
    }
    if (i < K - 1) continue;
    Pack<T> o;  // grad_pre[m] is token t + m; tap j of output t + K − 1 − j read token t
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < K; ++j) acc += static_cast<float>(taps[j][e]) * static_cast<float>(grad_pre[K - 1 - j].v[e]);
      o.v[e] = static_cast<T>(acc);
    }
    store_pack(grad_x + (ct.row_start + t) * C + ct.c0, o);
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kThreads) conv_silu_backward_kernel(const T* __restrict__ grad_out,
                                                                      const T* __restrict__ x, XStrides xs,
                                                                      const T* __restrict__ w, T* __restrict__ grad_x,
                                                                      uint32_t B, uint32_t L, uint32_t C) {
  ConvThread ct;
  if (!conv_thread(B, L, C, xs, ct)) return;
  T taps[K][kVec];
  load_taps<T, K>(w, ct.c0, taps);
  if (ct.t0 + kTile + K - 1 <= L) conv_silu_backward_tile<T, K, true>(grad_out, x, xs, taps, grad_x, L, C, ct);
  else conv_silu_backward_tile<T, K, false>(grad_out, x, xs, taps, grad_x, L, C, ct);
}

// Calls f(std::integral_constant<int, K>{}) for the runtime tap count K (1..kMaxTaps).
template <typename F>
void with_taps(int K, F&& f) {
  switch (K) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: TORCH_CHECK(false, "causal conv: kernel size ", K, " is outside 1..", kMaxTaps);
  }
}

uint32_t conv_blocks(int64_t B, int64_t L, int64_t C) {
  const int64_t threads = B * ((L + kTile - 1) / kTile) * (C / kVec);
  return static_cast<uint32_t>((threads + kThreads - 1) / kThreads);
}

void check_conv_args(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(causal_conv_accepts(x), "causal conv: x must be a CUDA [B, L, C] whose channels are contiguous, "
              "C, its strides and its start aligned to 8 elements, and every offset in it and the output under 2^31");
  TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(2) && w.is_contiguous() && w.scalar_type() == x.scalar_type(),
              "causal conv: w must be a contiguous [C, K] of x's dtype");
  TORCH_CHECK(w.size(1) >= 1 && w.size(1) <= kMaxTaps, "causal conv: kernel size must be 1..", kMaxTaps);
  TORCH_CHECK(pack_aligned(w), "causal conv: w must be aligned to 8 elements");
}

XStrides x_strides(const at::Tensor& x) {
  return {static_cast<uint32_t>(x.stride(0)), static_cast<uint32_t>(x.stride(1))};
}

// 64 = the delta rule's chunk size. One block per system; A (transposed for the transposed solve, so the inner
// loop always walks a row) sits in shared memory and is read by every thread at the same address (a broadcast);
// each thread carries one right-hand-side column through the substitution in registers.
constexpr int kChunk = 64;

// One 16-byte shared-memory read, as written: volatile keeps the reads in program order, so the compiler neither
// splits them into four nor hoists later rows' reads into (and spilled from) registers.
__device__ __forceinline__ float4 shared_load4(const float* p) {
  float4 v;
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(address) : "memory");
  return v;
}

template <bool kTranspose>
__global__ void __launch_bounds__(kThreads) unit_lower_solve_kernel(const float* __restrict__ A,
                                                                     const float* __restrict__ R,
                                                                     float* __restrict__ X, int64_t n) {
  __shared__ __align__(16) float a[kChunk][kChunk];
  const float* Am = A + blockIdx.x * static_cast<int64_t>(kChunk * kChunk);
  for (int e = threadIdx.x; e < kChunk * kChunk; e += blockDim.x) {
    const int row = e / kChunk, col = e % kChunk;
    if (kTranspose) a[col][row] = Am[e];
    else a[row][col] = Am[e];
  }
  __syncthreads();
  const int64_t base = blockIdx.x * static_cast<int64_t>(kChunk) * n;
  for (int64_t col = threadIdx.x; col < n; col += blockDim.x) {
    float x[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) x[i] = R[base + i * n + col];
    if (!kTranspose) {
      // x_i -= Σ_{j<i} A[i][j] x_j, i ascending
#pragma unroll
      for (int i = 1; i < kChunk; ++i) {
        float s = x[i];
#pragma unroll
        for (int q = 0; q < kChunk / 4; ++q) {  // broadcast reads, 16 bytes at a time
          if (4 * q >= i) break;
          const float4 v = shared_load4(&a[i][4 * q]);
          s -= v.x * x[4 * q];
          if (4 * q + 1 < i) s -= v.y * x[4 * q + 1];
          if (4 * q + 2 < i) s -= v.z * x[4 * q + 2];
          if (4 * q + 3 < i) s -= v.w * x[4 * q + 3];
        }
        x[i] = s;
      }
    } else {
      // (I + SL)^T: x_i -= Σ_{j>i} A[j][i] x_j = Σ_{j>i} a[i][j] x_j, i descending
#pragma unroll
      for (int i = kChunk - 2; i >= 0; --i) {
        float s = x[i];
#pragma unroll
        for (int q = 0; q < kChunk / 4; ++q) {
          if (4 * q + 3 <= i) continue;
          const float4 v = shared_load4(&a[i][4 * q]);
          if (4 * q > i) s -= v.x * x[4 * q];
          if (4 * q + 1 > i) s -= v.y * x[4 * q + 1];
          if (4 * q + 2 > i) s -= v.z * x[4 * q + 2];
          s -= v.w * x[4 * q + 3];
        }
        x[i] = s;
      }
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) X[base + i * n + col] = x[i];
  }
}

}  // namespace

bool causal_conv_accepts(const at::Tensor& x) {
  if (!x.is_cuda() || x.dim() != 3 || x.stride(2) != 1 || x.size(2) % kVec != 0 || !pack_aligned(x)) return false;
  if (x.numel() == 0) return true;
  if (x.stride(0) % kVec != 0 || x.stride(1) % kVec != 0 || x.stride(0) < 0 || x.stride(1) < 0) return false;
  const int64_t last = (x.size(0) - 1) * x.stride(0) + (x.size(1) - 1) * x.stride(1) + x.size(2);
  return last < (int64_t{1} << 31) && x.numel() < (int64_t{1} << 31);
}

at::Tensor causal_conv_silu_forward(const at::Tensor& x, const at::Tensor& w) {
  check_conv_args(x, w);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return out;
  auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_forward", [&] {
    with_taps(static_cast<int>(w.size(1)), [&](auto taps) {
      conv_silu_forward_kernel<scalar_t, decltype(taps)::value><<<conv_blocks(B, L, C), kThreads, 0, stream>>>(
          x.data_ptr<scalar_t>(), x_strides(x), w.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), static_cast<uint32_t>(B),
          static_cast<uint32_t>(L), static_cast<uint32_t>(C));
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor causal_conv_silu_backward(const at::Tensor& grad_out_in, const at::Tensor& x, const at::Tensor& w) {
  check_conv_args(x, w);
  const at::Tensor grad_out = packed_gradient(grad_out_in, x);
  TORCH_CHECK(grad_out.sizes() == x.sizes(), "causal conv backward: grad_out must have x's shape");
  at::Tensor grad_x = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return grad_x;
  auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t B = x.size(0), L = x.size(1), C = x.size(2);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_backward", [&] {
    with_taps(static_cast<int>(w.size(1)), [&](auto taps) {
      conv_silu_backward_kernel<scalar_t, decltype(taps)::value><<<conv_blocks(B, L, C), kThreads, 0, stream>>>(
          grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), x_strides(x), w.data_ptr<scalar_t>(),
          grad_x.data_ptr<scalar_t>(),
          static_cast<uint32_t>(B), static_cast<uint32_t>(L), static_cast<uint32_t>(C));
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_x;
}

at::Tensor unit_lower_solve(const at::Tensor& A, const at::Tensor& R, bool transpose) {
  TORCH_CHECK(A.is_cuda() && A.scalar_type() == at::kFloat && R.scalar_type() == at::kFloat,
              "unit_lower_solve: float32 CUDA tensors");
  TORCH_CHECK(A.dim() >= 2 && A.size(-1) == kChunk && A.size(-2) == kChunk, "unit_lower_solve: A must be [..., 64, 64]");
  TORCH_CHECK(R.dim() == A.dim() && R.size(-2) == kChunk, "unit_lower_solve: R must be [..., 64, n]");
  at::Tensor a = A.contiguous(), r = R.contiguous();
  const int64_t systems = a.numel() / (kChunk * kChunk), n = r.size(-1);
  TORCH_CHECK(r.numel() == systems * kChunk * n, "unit_lower_solve: A and R hold different numbers of systems");
  at::Tensor x = at::empty_like(r);
  if (systems == 0 || n == 0) return x;
  auto stream = at::cuda::getCurrentCUDAStream();
  if (transpose) {
    unit_lower_solve_kernel<true><<<systems, kThreads, 0, stream>>>(a.data_ptr<float>(), r.data_ptr<float>(),
                                                                    x.data_ptr<float>(), n);
  } else {
    unit_lower_solve_kernel<false><<<systems, kThreads, 0, stream>>>(a.data_ptr<float>(), r.data_ptr<float>(),
                                                                     x.data_ptr<float>(), n);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return x;
}

}  // namespace rlloop::cuda
