#include "kernels/vision_rope.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace rlloop::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per (patch, q or k, head, i < d/2): it writes elements i and i + d/2, which read each other
// (rotate_half(x)[i] = −x[i + d/2], rotate_half(x)[i + d/2] = x[i]). Consecutive threads take consecutive i, so
// reads and writes are coalesced. __fmul_rn / __fadd_rn keep ATen's separate roundings (x·cos, then r·sin, then the
// sum) from being contracted into fused multiply-adds.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    vision_rope_kernel(const T* __restrict__ qkv, const float* __restrict__ cos, const float* __restrict__ sin,
                       T* __restrict__ q, T* __restrict__ k, uint32_t N, uint32_t H, uint32_t d) {
  const uint32_t half = d / 2;
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= 2 * N * H * half) return;
  const uint32_t i = g % half, head = (g / half) % H, which = (g / (half * H)) % 2, n = g / (half * H * 2);
  const T* src = qkv + ((n * 3 + which) * H + head) * d;
  const float a = static_cast<float>(src[i]), b = static_cast<float>(src[i + half]);
  const float* c = cos + n * d;
  const float* s = sin + n * d;
  const float lo = __fadd_rn(__fmul_rn(a, c[i]), __fmul_rn(-b, s[i]));
  const float hi = __fadd_rn(__fmul_rn(b, c[i + half]), __fmul_rn(a, s[i + half]));
  T* dst = (which == 0 ? q : k) + (n * H + head) * d;
  dst[i] = static_cast<T>(lo);
  dst[i + half] = static_cast<T>(hi);
}

}  // namespace

bool vision_rope_kernel_accepts(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin) {
  const bool dtype_ok = qkv.scalar_type() == at::kBFloat16 || qkv.scalar_type() == at::kFloat;
  if (!qkv.is_cuda() || !dtype_ok || qkv.dim() != 4 || qkv.size(1) != 3 || !qkv.is_contiguous()) return false;
  const int64_t N = qkv.size(0), d = qkv.size(3);
  const auto table_ok = [&](const at::Tensor& t) {
    return t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 2 && t.size(0) == N && t.size(1) == d &&
           t.is_contiguous();
  };
  return d % 2 == 0 && table_ok(cos) && table_ok(sin) && qkv.numel() < (int64_t{1} << 31);
}

std::pair<at::Tensor, at::Tensor> vision_rope(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(vision_rope_kernel_accepts(qkv, cos, sin), "vision_rope: unsupported operands");
  const int64_t N = qkv.size(0), H = qkv.size(2), d = qkv.size(3);
  at::Tensor q = at::empty({N, H, d}, qkv.options()), k = at::empty({N, H, d}, qkv.options());
  const int64_t threads = N * H * d;  // 2 tensors x d/2 pairs
  if (threads == 0) return {q, k};
  const auto blocks = static_cast<uint32_t>((threads + kThreads - 1) / kThreads);
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, qkv.scalar_type(), "vision_rope", [&] {
    vision_rope_kernel<scalar_t><<<blocks, kThreads, 0, stream>>>(
        qkv.data_ptr<scalar_t>(), cos.data_ptr<float>(), sin.data_ptr<float>(), q.data_ptr<scalar_t>(),
        k.data_ptr<scalar_t>(), static_cast<uint32_t>(N), static_cast<uint32_t>(H), static_cast<uint32_t>(d));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {q, k};
}

}  // namespace rlloop::cuda
