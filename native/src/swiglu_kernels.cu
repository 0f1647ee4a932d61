#include "swiglu_kernels.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "cuda_device_helpers.cuh"

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

// A grid-strided walk over packs of eight elements (the operands are one flat, aligned array each).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out, int64_t packs) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const Pack<T> gp = load_pack(gate + p * kVec), upk = load_pack(up + p * kVec);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      o.v[e] = static_cast<T>(rounded<T>(silu(static_cast<float>(gp.v[e]))) * static_cast<float>(upk.v[e]));
    }
    store_pack(out + p * kVec, o);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ gate, const T* __restrict__ up,
                           T* __restrict__ grad_gate, T* __restrict__ grad_up, int64_t packs) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const Pack<T> dp = load_pack(grad_out + p * kVec), gp = load_pack(gate + p * kVec), upk = load_pack(up + p * kVec);
    Pack<T> dg, du;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float d = static_cast<float>(dp.v[e]), g = static_cast<float>(gp.v[e]);
      const float d_silu = rounded<T>(d * static_cast<float>(upk.v[e]));  // mul's backward, in the model dtype
      du.v[e] = static_cast<T>(d * rounded<T>(silu(g)));
      dg.v[e] = static_cast<T>(silu_grad(d_silu, g));
    }
    store_pack(grad_gate + p * kVec, dg);
    store_pack(grad_up + p * kVec, du);
  }
}

// Enough blocks to fill the device a few times over; the kernels stride over the rest.
dim3 blocks_for(int64_t packs) {
  const int64_t wanted = (packs + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 8;
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap))));
}

void check_operands(const at::Tensor& gate, const at::Tensor& up) {
  TORCH_CHECK(swiglu_kernels_accept(gate, up), "swiglu kernel: gate and up must be contiguous, aligned CUDA tensors "
              "of one shape and dtype (float32 or bfloat16) with a multiple of 8 elements");
}

}  // namespace

bool swiglu_kernels_accept(const at::Tensor& gate, const at::Tensor& up) {
  return gate.is_cuda() && (gate.scalar_type() == at::kBFloat16 || gate.scalar_type() == at::kFloat) &&
         up.scalar_type() == gate.scalar_type() && up.sizes() == gate.sizes() && gate.is_contiguous() &&
         up.is_contiguous() && gate.numel() % kVec == 0 && pack_aligned(gate) && pack_aligned(up);
}

at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up) {
  check_operands(gate, up);
  at::Tensor out = at::empty_like(gate);
  const int64_t packs = gate.numel() / kVec;
  if (packs == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_forward", [&] {
    swiglu_forward_kernel<scalar_t><<<blocks_for(packs), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gate.data_ptr<scalar_t>(), up.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), packs);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad_out_in, const at::Tensor& gate,
                                                   const at::Tensor& up) {
  check_operands(gate, up);
  const at::Tensor grad_out = packed_gradient(grad_out_in, gate);
  TORCH_CHECK(grad_out.sizes() == gate.sizes(), "swiglu kernel: the output gradient must be shaped like gate");
  at::Tensor grad_gate = at::empty_like(gate), grad_up = at::empty_like(up);
  const int64_t packs = gate.numel() / kVec;
  if (packs == 0) return {grad_gate, grad_up};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_backward", [&] {
    swiglu_backward_kernel<scalar_t><<<blocks_for(packs), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        grad_out.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), up.data_ptr<scalar_t>(),
        grad_gate.data_ptr<scalar_t>(), grad_up.data_ptr<scalar_t>(), packs);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {grad_gate, grad_up};
}

}  // namespace rlloop::cuda
