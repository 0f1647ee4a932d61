#include "kernels/swiglu.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <vector>

#include "kernels/device_helpers.cuh"

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

// A grid-strided walk over packs of eight outputs. Pack p of the [rows, I] output lies in row p / (I / 8); its gate
// is at the same column of that row's first half of gate_up, its up at that column of the second half.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t packs, int64_t row_packs) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = p / row_packs, gate_at = (p + row * row_packs) * kVec;
    const Pack<T> gp = load_pack(gate_up + gate_at), upk = load_pack(gate_up + gate_at + row_packs * kVec);
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
    swiglu_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ gate_up, T* __restrict__ grad_gate_up,
                           int64_t packs, int64_t row_packs) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t row = p / row_packs, gate_at = (p + row * row_packs) * kVec, up_at = gate_at + row_packs * kVec;
    const Pack<T> dp = load_pack(grad_out + p * kVec), gp = load_pack(gate_up + gate_at), upk = load_pack(gate_up + up_at);
    Pack<T> dg, du;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float d = static_cast<float>(dp.v[e]), g = static_cast<float>(gp.v[e]);
      const float d_silu = rounded<T>(d * static_cast<float>(upk.v[e]));  // mul's backward, in the model dtype
      du.v[e] = static_cast<T>(d * rounded<T>(silu(g)));
      dg.v[e] = static_cast<T>(silu_grad(d_silu, g));
    }
    store_pack(grad_gate_up + gate_at, dg);
    store_pack(grad_gate_up + up_at, du);
  }
}

// Enough blocks to fill the device a few times over; the kernels stride over the rest.
dim3 blocks_for(int64_t packs) {
  const int64_t wanted = (packs + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 8;
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap))));
}

void check_operand(const at::Tensor& gate_up) {
  TORCH_CHECK(swiglu_kernels_accept(gate_up), "swiglu kernel: gate_up must be a contiguous, aligned float32 or "
              "bfloat16 CUDA tensor whose last dimension is 2I, I a multiple of 8");
}

std::vector<int64_t> output_shape(const at::Tensor& gate_up) {
  std::vector<int64_t> shape = gate_up.sizes().vec();
  shape.back() /= 2;
  return shape;
}

}  // namespace

bool swiglu_kernels_accept(const at::Tensor& gate_up) {
  return gate_up.is_cuda() && (gate_up.scalar_type() == at::kBFloat16 || gate_up.scalar_type() == at::kFloat) &&
         gate_up.dim() >= 1 && gate_up.size(-1) % (2 * kVec) == 0 && gate_up.is_contiguous() && pack_aligned(gate_up);
}

at::Tensor swiglu_forward(const at::Tensor& gate_up) {
  check_operand(gate_up);
  at::Tensor out = at::empty(output_shape(gate_up), gate_up.options());
  const int64_t packs = out.numel() / kVec, row_packs = out.size(-1) / kVec;
  if (packs == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate_up.scalar_type(), "swiglu_forward", [&] {
    swiglu_forward_kernel<scalar_t><<<blocks_for(packs), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gate_up.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), packs, row_packs);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor swiglu_backward(const at::Tensor& grad_out_in, const at::Tensor& gate_up) {
  check_operand(gate_up);
  const at::Tensor grad_out = packed_gradient(grad_out_in, gate_up);
  TORCH_CHECK(grad_out.sizes() == at::IntArrayRef(output_shape(gate_up)),
              "swiglu kernel: the output gradient must be shaped like gate_up with its last dimension halved");
  at::Tensor grad_gate_up = at::empty_like(gate_up);
  const int64_t packs = grad_out.numel() / kVec, row_packs = grad_out.size(-1) / kVec;
  if (packs == 0) return grad_gate_up;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate_up.scalar_type(), "swiglu_backward", [&] {
    swiglu_backward_kernel<scalar_t><<<blocks_for(packs), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        grad_out.data_ptr<scalar_t>(), gate_up.data_ptr<scalar_t>(), grad_gate_up.data_ptr<scalar_t>(), packs, row_packs);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_gate_up;
}

}  // namespace rlloop::cuda
