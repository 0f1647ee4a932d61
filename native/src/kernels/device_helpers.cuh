// Device-side helpers shared by the project's CUDA kernels: eight consecutive elements moved as one vector (16
// bytes of bfloat16, 32 of float32; pointers aligned to the pack size, which the launchers check), warp sums, and
// SiLU as ATen computes it in float32.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace rlloop::cuda {

constexpr int kWarp = 32;

constexpr int kVec = 8;

template <typename T>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p) = v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Σ x² over a row of n elements (n a multiple of kVec) read by one warp, pack by pack; every lane gets the sum.
template <typename T>
__device__ float warp_sum_of_squares(const T* x, int64_t n, int lane) {
  float sum_sq = 0.0f;
  for (int64_t c = static_cast<int64_t>(lane) * kVec; c < n; c += kWarp * kVec) {
    const Pack<T> p = load_pack(x + c);
#pragma unroll
    for (int e = 0; e < kVec; ++e) sum_sq += static_cast<float>(p.v[e]) * static_cast<float>(p.v[e]);
  }
  return warp_sum(sum_sq);
}

// ATen's float32 SiLU forward, the sigmoid its backward uses, and that backward (silu_backward's order: dy·s, then
// times 1 + x·(1 − s)).
__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }
__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }
__device__ __forceinline__ float silu_grad(float dy, float x) {
  const float s = sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

// The value after rounding to T, as ATen's ops in T produce it (identity for float32).
template <typename T>
__device__ __forceinline__ float rounded(float v) {
  return static_cast<float>(static_cast<T>(v));
}

// Whether t's data can be read as Pack<T> of its own dtype (the launchers' check, host side).
inline bool pack_aligned(const at::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % (t.element_size() * kVec) == 0;
}

// An incoming gradient in like's dtype, contiguous and pack-aligned (a view at an odd offset is copied).
inline at::Tensor packed_gradient(const at::Tensor& grad, const at::Tensor& like) {
  at::Tensor g = grad.to(like.scalar_type()).contiguous();
  return pack_aligned(g) ? g : g.clone();
}

}  // namespace rlloop::cuda
