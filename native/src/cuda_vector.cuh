// Eight consecutive elements moved as one vector (16 bytes of bfloat16, 32 of float32), shared by the project's
// CUDA kernels. Pointers must be aligned to the pack size; the launchers check it.
#pragma once

namespace rlloop::cuda {

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

}  // namespace rlloop::cuda
