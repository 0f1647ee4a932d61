#include "gdn_kernels.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "cuda_device_helpers.cuh"

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

// Eight consecutive channels of one token per thread (one 16-byte load per tap for bf16, cuda_device_helpers.cuh):
// neighbouring threads take neighbouring channel groups, so every tap is a coalesced read, and the K taps of a
// token hit the cache lines the previous token's thread read. Index arithmetic in 32 bits (the launcher checks
// the size).

// acc[e] = Σ_j w[c0 + e, j] · x[t - K + 1 + j, c0 + e], then rounded to T (conv1d's output dtype).
template <typename T>
__device__ __forceinline__ void causal_conv8(const T* __restrict__ x, const T* __restrict__ w, uint32_t token,
                                             uint32_t t, uint32_t c0, uint32_t C, int K, float (&pre)[kVec]) {
  float acc[kVec] = {};
  for (int j = 0; j < K; ++j) {
    const uint32_t back = K - 1 - j;  // tap j reads token t - back
    if (t < back) continue;
    const Pack<T> xv = load_pack(x + (token - back) * C + c0);
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] += static_cast<float>(w[(c0 + e) * K + j]) * static_cast<float>(xv.v[e]);
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) pre[e] = static_cast<float>(static_cast<T>(acc[e]));
}

// This thread's eight channels: the token (b·L + t) they belong to, the first channel c0 and the position t in
// the row; false past the last group.
__device__ __forceinline__ bool channel_group(uint32_t L, uint32_t C, uint32_t groups, uint32_t& token,
                                              uint32_t& c0, uint32_t& t) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return false;
  const uint32_t per_token = C / kVec;
  token = g / per_token;
  c0 = (g % per_token) * kVec;
  t = token % L;
  return true;
}

template <typename T>
__global__ void conv_silu_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                                         uint32_t L, uint32_t C, int K, uint32_t groups) {
  uint32_t token, c0, t;
  if (!channel_group(L, C, groups, token, c0, t)) return;
  float pre[kVec];
  causal_conv8(x, w, token, t, c0, C, K, pre);
  Pack<T> o;
#pragma unroll
  for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(silu(pre[e]));
  store_pack(out + token * C + c0, o);
}

// d/dpre silu(pre) · grad_out, rounded to the dtype as autograd's SiluBackward is; pre recomputed from x.
template <typename T>
__global__ void conv_silu_grad_pre_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                          const T* __restrict__ w, T* __restrict__ grad_pre, uint32_t L, uint32_t C,
                                          int K, uint32_t groups) {
  uint32_t token, c0, t;
  if (!channel_group(L, C, groups, token, c0, t)) return;
  float pre[kVec];
  causal_conv8(x, w, token, t, c0, C, K, pre);
  const Pack<T> go = load_pack(grad_out + token * C + c0);
  Pack<T> o;
#pragma unroll
  for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(silu_grad(static_cast<float>(go.v[e]), pre[e]));
  store_pack(grad_pre + token * C + c0, o);
}

// grad_x[t] = Σ_j w[j] · grad_pre[t + K - 1 - j] (the transposed causal conv), float32 accumulation.
template <typename T>
__global__ void conv_input_grad_kernel(const T* __restrict__ grad_pre, const T* __restrict__ w, T* __restrict__ grad_x,
                                       uint32_t L, uint32_t C, int K, uint32_t groups) {
  uint32_t token, c0, t;
  if (!channel_group(L, C, groups, token, c0, t)) return;
  float acc[kVec] = {};
  for (int j = 0; j < K; ++j) {
    const uint32_t ahead = K - 1 - j;  // output t + ahead read this token through tap j
    if (t + ahead >= L) continue;
    const Pack<T> gv = load_pack(grad_pre + (token + ahead) * C + c0);
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] += static_cast<float>(w[(c0 + e) * K + j]) * static_cast<float>(gv.v[e]);
  }
  Pack<T> o;
#pragma unroll
  for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(acc[e]);
  store_pack(grad_x + token * C + c0, o);
}

void check_conv_args(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous(), "causal conv: x must be a contiguous CUDA [B, L, C]");
  TORCH_CHECK(x.size(2) % kVec == 0 && x.numel() < (int64_t{1} << 31), "causal conv: C must be a multiple of 8 and x under 2^31 elements");
  TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(2) && w.is_contiguous() && w.scalar_type() == x.scalar_type(),
              "causal conv: w must be a contiguous [C, K] of x's dtype");
}

uint32_t blocks_for(int64_t threads) { return static_cast<uint32_t>((threads + kThreads - 1) / kThreads); }

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

at::Tensor causal_conv_silu_forward(const at::Tensor& x, const at::Tensor& w) {
  check_conv_args(x, w);
  at::Tensor out = at::empty_like(x);
  const int64_t total = x.numel();
  if (total == 0) return out;
  auto stream = at::cuda::getCurrentCUDAStream();
  const auto groups = static_cast<uint32_t>(total / kVec);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_forward", [&] {
    conv_silu_forward_kernel<scalar_t><<<blocks_for(groups), kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), static_cast<uint32_t>(x.size(1)),
        static_cast<uint32_t>(x.size(2)), static_cast<int>(w.size(1)), groups);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor causal_conv_silu_backward(const at::Tensor& grad_out_in, const at::Tensor& x, const at::Tensor& w) {
  check_conv_args(x, w);
  at::Tensor grad_out = grad_out_in.to(x.scalar_type()).contiguous();
  TORCH_CHECK(grad_out.sizes() == x.sizes(), "causal conv backward: grad_out must have x's shape");
  at::Tensor grad_pre = at::empty_like(x), grad_x = at::empty_like(x);
  const int64_t total = x.numel();
  if (total == 0) return grad_x;
  auto stream = at::cuda::getCurrentCUDAStream();
  const auto L = static_cast<uint32_t>(x.size(1)), C = static_cast<uint32_t>(x.size(2));
  const int K = static_cast<int>(w.size(1));
  const auto groups = static_cast<uint32_t>(total / kVec);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_backward", [&] {
    conv_silu_grad_pre_kernel<scalar_t><<<blocks_for(groups), kThreads, 0, stream>>>(
        grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), grad_pre.data_ptr<scalar_t>(),
        L, C, K, groups);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    conv_input_grad_kernel<scalar_t><<<blocks_for(groups), kThreads, 0, stream>>>(
        grad_pre.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), grad_x.data_ptr<scalar_t>(), L, C, K, groups);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
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
