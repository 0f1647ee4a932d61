#include "kernels/qkv_heads.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/device_helpers.cuh"

namespace rlloop::cuda {
namespace {

// One warp per (row, token, head slot): slots 0 … Hk−1 are q's key heads, Hk … 2Hk−1 k's, then the H value heads,
// in mixed's own order, so neighbouring warps read neighbouring memory. A lane moves eight elements at a time (a
// 128-wide head is half a warp's single pass); q and k rows are read twice (norm, then write), the second time
// from cache.
constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarp * kWarpsPerBlock;
constexpr int kStride = kWarp * kVec;

struct Shape {
  int64_t B, L, Lp, Hk, H, d, repeat, slots, conv_dim;
};

struct WarpTask {
  int64_t b, t;
  int64_t slot;
  int lane;
};

// warp → (b, t, slot) over B × len × slots; false past the end (whole warps, so shuffles see full warps).
__device__ __forceinline__ bool warp_task(const Shape& s, int64_t len, WarpTask& task) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (warp >= s.B * len * s.slots) return false;
  task.slot = warp % s.slots;
  const int64_t bt = warp / s.slots;
  task.t = bt % len;
  task.b = bt / len;
  task.lane = static_cast<int>(threadIdx.x % kWarp);
  return true;
}

// rsqrt(Σ x² + eps) of one head row, in every lane (ATen: (x * x).sum(-1) + eps, then rsqrt).
template <typename T>
__device__ float inverse_norm(const T* x, int64_t d, int lane, float eps) {
  return rsqrtf(warp_sum_of_squares(x, d, lane) + eps);
}

__device__ __forceinline__ int64_t head_row(const Shape& s, int64_t b, int64_t head, int64_t t) {
  return ((b * s.H + head) * s.Lp + t) * s.d;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    qkv_heads_forward_kernel(const T* __restrict__ mixed, float* __restrict__ q, float* __restrict__ k,
                             float* __restrict__ v, Shape s, float q_scale, float eps) {
  WarpTask w;
  if (!warp_task(s, s.Lp, w)) return;
  const bool real = w.t < s.L;  // rows L … Lp − 1 are the chunk padding: zeros
  const T* src = mixed + (w.b * s.L + w.t) * s.conv_dim + w.slot * s.d;
  if (w.slot >= 2 * s.Hk) {
    float* dst = v + head_row(s, w.b, w.slot - 2 * s.Hk, w.t);
    for (int64_t c = w.lane * kVec; c < s.d; c += kStride) {
      Pack<float> o;
      if (real) {
        const Pack<T> p = load_pack(src + c);
#pragma unroll
        for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<float>(p.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) o.v[e] = 0.0f;
      }
      store_pack(dst + c, o);
    }
    return;
  }
  const bool is_q = w.slot < s.Hk;
  const int64_t key_head = is_q ? w.slot : w.slot - s.Hk;
  const float inv = real ? inverse_norm(src, s.d, w.lane, eps) : 0.0f;
  float* out = is_q ? q : k;
  for (int64_t c = w.lane * kVec; c < s.d; c += kStride) {
    Pack<float> o;
    if (real) {
      const Pack<T> p = load_pack(src + c);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float y = static_cast<float>(p.v[e]) * inv;  // then the scale, as two float32 multiplies like ATen
        o.v[e] = is_q ? y * q_scale : y;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = 0.0f;
    }
    for (int64_t j = 0; j < s.repeat; ++j) store_pack(out + head_row(s, w.b, key_head * s.repeat + j, w.t) + c, o);
  }
}

// g = (Σ over the key head's repeats of the output gradient) · scale; y = x·n with n = rsqrt(Σx² + eps):
// dx = g·n − x·n³·Σ(g·x).
__device__ __forceinline__ void repeated_gradient(const float* grad, const Shape& s, const WarpTask& w,
                                                  int64_t key_head, int64_t c, float scale, float (&g)[kVec]) {
#pragma unroll
  for (int e = 0; e < kVec; ++e) g[e] = 0.0f;
  for (int64_t j = 0; j < s.repeat; ++j) {
    const Pack<float> p = load_pack(grad + head_row(s, w.b, key_head * s.repeat + j, w.t) + c);
#pragma unroll
    for (int e = 0; e < kVec; ++e) g[e] += p.v[e];
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) g[e] *= scale;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    qkv_heads_backward_kernel(const float* __restrict__ grad_q, const float* __restrict__ grad_k,
                              const float* __restrict__ grad_v, const T* __restrict__ mixed, T* __restrict__ grad_mixed,
                              Shape s, float q_scale, float eps) {
  WarpTask w;
  if (!warp_task(s, s.L, w)) return;  // padding rows have no input
  const int64_t offset = (w.b * s.L + w.t) * s.conv_dim + w.slot * s.d;
  T* dst = grad_mixed + offset;
  if (w.slot >= 2 * s.Hk) {
    const float* src = grad_v + head_row(s, w.b, w.slot - 2 * s.Hk, w.t);
    for (int64_t c = w.lane * kVec; c < s.d; c += kStride) {
      const Pack<float> p = load_pack(src + c);
      Pack<T> o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(p.v[e]);
      store_pack(dst + c, o);
    }
    return;
  }
  const bool is_q = w.slot < s.Hk;
  const int64_t key_head = is_q ? w.slot : w.slot - s.Hk;
  const float* grad = is_q ? grad_q : grad_k;
  const float scale = is_q ? q_scale : 1.0f;
  const T* x = mixed + offset;
  float sum_sq = 0.0f, dot = 0.0f, g[kVec];
  for (int64_t c = w.lane * kVec; c < s.d; c += kStride) {
    const Pack<T> p = load_pack(x + c);
    repeated_gradient(grad, s, w, key_head, c, scale, g);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float xv = static_cast<float>(p.v[e]);
      sum_sq += xv * xv;
      dot += g[e] * xv;
    }
  }
  const float n = rsqrtf(warp_sum(sum_sq) + eps);
  const float coef = n * n * n * warp_sum(dot);
  for (int64_t c = w.lane * kVec; c < s.d; c += kStride) {
    const Pack<T> p = load_pack(x + c);
    repeated_gradient(grad, s, w, key_head, c, scale, g);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(g[e] * n - static_cast<float>(p.v[e]) * coef);
    store_pack(dst + c, o);
  }
}

Shape shape_of(const at::Tensor& mixed, int64_t key_heads, int64_t value_heads, int64_t head_dim, int64_t padded_len) {
  return {mixed.size(0), mixed.size(1), padded_len, key_heads, value_heads, head_dim, value_heads / key_heads,
          2 * key_heads + value_heads, mixed.size(2)};
}

unsigned blocks_for(int64_t warps) { return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

at::Tensor float_grad(const at::Tensor& grad, const at::Tensor& like) {
  if (!grad.defined()) return at::zeros(like.sizes(), like.options().dtype(at::kFloat));
  at::Tensor g = grad.to(at::kFloat).contiguous();
  if (!pack_aligned(g)) g = g.clone();
  return g;
}

}  // namespace

bool qkv_heads_kernels_accept(const at::Tensor& mixed, int64_t key_heads, int64_t value_heads, int64_t head_dim) {
  return mixed.is_cuda() && (mixed.scalar_type() == at::kBFloat16 || mixed.scalar_type() == at::kFloat) &&
         mixed.dim() == 3 && mixed.is_contiguous() && pack_aligned(mixed) && head_dim % kVec == 0 && key_heads > 0 &&
         value_heads % key_heads == 0 && mixed.size(2) == (2 * key_heads + value_heads) * head_dim;
}

std::array<at::Tensor, 3> qkv_heads_forward(const at::Tensor& mixed, int64_t key_heads, int64_t value_heads,
                                            int64_t head_dim, int64_t padded_len, double q_scale, double eps) {
  TORCH_CHECK(qkv_heads_kernels_accept(mixed, key_heads, value_heads, head_dim) && padded_len >= mixed.size(1),
              "qkv heads kernel: mixed must be a contiguous, aligned float32/bfloat16 CUDA [B, L, (2Hk + H)·d]");
  const Shape s = shape_of(mixed, key_heads, value_heads, head_dim, padded_len);
  const auto options = mixed.options().dtype(at::kFloat);
  std::array<at::Tensor, 3> out{at::empty({s.B, s.H, s.Lp, s.d}, options), at::empty({s.B, s.H, s.Lp, s.d}, options),
                                at::empty({s.B, s.H, s.Lp, s.d}, options)};
  const int64_t warps = s.B * s.Lp * s.slots;
  if (warps == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, mixed.scalar_type(), "qkv_heads_forward", [&] {
    qkv_heads_forward_kernel<scalar_t><<<blocks_for(warps), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        mixed.data_ptr<scalar_t>(), out[0].data_ptr<float>(), out[1].data_ptr<float>(), out[2].data_ptr<float>(), s,
        static_cast<float>(q_scale), static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor qkv_heads_backward(const at::Tensor& grad_q, const at::Tensor& grad_k, const at::Tensor& grad_v,
                              const at::Tensor& mixed, int64_t key_heads, int64_t value_heads, int64_t head_dim,
                              double q_scale, double eps) {
  TORCH_CHECK(qkv_heads_kernels_accept(mixed, key_heads, value_heads, head_dim),
              "qkv heads kernel: mixed must be a contiguous, aligned float32/bfloat16 CUDA [B, L, (2Hk + H)·d]");
  const at::Tensor& like = grad_q.defined() ? grad_q : grad_k.defined() ? grad_k : grad_v;
  at::Tensor grad_mixed = at::empty_like(mixed);
  if (!like.defined()) return grad_mixed.zero_();
  TORCH_CHECK(like.dim() == 4 && like.size(0) == mixed.size(0) && like.size(1) == value_heads &&
              like.size(2) >= mixed.size(1) && like.size(3) == head_dim, "qkv heads kernel: gradients must be [B, H, Lp, d]");
  const Shape s = shape_of(mixed, key_heads, value_heads, head_dim, like.size(2));
  const at::Tensor gq = float_grad(grad_q, like), gk = float_grad(grad_k, like), gv = float_grad(grad_v, like);
  const int64_t warps = s.B * s.L * s.slots;
  if (warps == 0) return grad_mixed;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, mixed.scalar_type(), "qkv_heads_backward", [&] {
    qkv_heads_backward_kernel<scalar_t><<<blocks_for(warps), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gq.data_ptr<float>(), gk.data_ptr<float>(), gv.data_ptr<float>(), mixed.data_ptr<scalar_t>(),
        grad_mixed.data_ptr<scalar_t>(), s, static_cast<float>(q_scale), static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_mixed;
}

}  // namespace rlloop::cuda
