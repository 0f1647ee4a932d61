#include "gdn_kernels.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float to_float(const T* p) {
  return static_cast<float>(*p);
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

// One thread per output element; neighbouring threads take neighbouring channels, so every tap is a coalesced
// read (the K taps of a channel hit the same cache lines as the previous token's).
template <typename T>
__global__ void conv_silu_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ out,
                                         int64_t L, int64_t C, int K, int64_t total) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t c = i % C, t = (i / C) % L;
  float acc = 0.0f;
  for (int j = 0; j < K; ++j) {
    const int64_t back = K - 1 - j;  // tap j reads token t - back
    if (t >= back) acc += to_float(w + c * K + j) * to_float(x + i - back * C);
  }
  const float pre = static_cast<float>(static_cast<T>(acc));  // the conv's output dtype, as conv1d then silu
  out[i] = static_cast<T>(silu(pre));
}

// d/dpre silu(pre) · grad_out, rounded to the dtype as autograd's SiluBackward is; pre recomputed from x.
template <typename T>
__global__ void conv_silu_grad_pre_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                          const T* __restrict__ w, T* __restrict__ grad_pre, int64_t L, int64_t C,
                                          int K, int64_t total) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t c = i % C, t = (i / C) % L;
  float acc = 0.0f;
  for (int j = 0; j < K; ++j) {
    const int64_t back = K - 1 - j;
    if (t >= back) acc += to_float(w + c * K + j) * to_float(x + i - back * C);
  }
  const float pre = static_cast<float>(static_cast<T>(acc));
  const float s = 1.0f / (1.0f + __expf(-pre));
  grad_pre[i] = static_cast<T>(to_float(grad_out + i) * s * (1.0f + pre * (1.0f - s)));
}

// grad_x[t] = Σ_j w[j] · grad_pre[t + K - 1 - j] (the transposed causal conv), float32 accumulation.
template <typename T>
__global__ void conv_input_grad_kernel(const T* __restrict__ grad_pre, const T* __restrict__ w, T* __restrict__ grad_x,
                                       int64_t L, int64_t C, int K, int64_t total) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= total) return;
  const int64_t c = i % C, t = (i / C) % L;
  float acc = 0.0f;
  for (int j = 0; j < K; ++j) {
    const int64_t ahead = K - 1 - j;  // output t + ahead read this token through tap j
    if (t + ahead < L) acc += to_float(w + c * K + j) * to_float(grad_pre + i + ahead * C);
  }
  grad_x[i] = static_cast<T>(acc);
}

void check_conv_args(const at::Tensor& x, const at::Tensor& w) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 3 && x.is_contiguous(), "causal conv: x must be a contiguous CUDA [B, L, C]");
  TORCH_CHECK(w.dim() == 2 && w.size(0) == x.size(2) && w.is_contiguous() && w.scalar_type() == x.scalar_type(),
              "causal conv: w must be a contiguous [C, K] of x's dtype");
}

int64_t blocks_for(int64_t total) { return (total + kThreads - 1) / kThreads; }

// 64 = the delta rule's chunk size. One block per system; A (transposed for the transposed solve, so the inner
// loop always walks a row) sits in shared memory and is read by every thread at the same address (a broadcast);
// each thread carries one right-hand-side column through the substitution in registers.
constexpr int kChunk = 64;

template <bool kTranspose>
__global__ void __launch_bounds__(kThreads) unit_lower_solve_kernel(const float* __restrict__ A,
                                                                     const float* __restrict__ R,
                                                                     float* __restrict__ X, int64_t n) {
  __shared__ float a[kChunk][kChunk];
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
        const volatile float* row = a[i];  // volatile: read at use, not hoisted into (and spilled from) registers
        float s = x[i];
#pragma unroll
        for (int j = 0; j < i; ++j) s -= row[j] * x[j];
        x[i] = s;
      }
    } else {
      // (I + SL)^T: x_i -= Σ_{j>i} A[j][i] x_j = Σ_{j>i} a[i][j] x_j, i descending
#pragma unroll
      for (int i = kChunk - 2; i >= 0; --i) {
        const volatile float* row = a[i];
        float s = x[i];
#pragma unroll
        for (int j = i + 1; j < kChunk; ++j) s -= row[j] * x[j];
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
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_forward", [&] {
    conv_silu_forward_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), x.size(1), x.size(2),
        static_cast<int>(w.size(1)), total);
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
  const int64_t L = x.size(1), C = x.size(2);
  const int K = static_cast<int>(w.size(1));
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "causal_conv_silu_backward", [&] {
    conv_silu_grad_pre_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), grad_pre.data_ptr<scalar_t>(),
        L, C, K, total);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    conv_input_grad_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        grad_pre.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), grad_x.data_ptr<scalar_t>(), L, C, K, total);
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
