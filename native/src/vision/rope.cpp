#include "vision/rope.h"

#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/vision_rope.h"
#endif

namespace rlloop {
namespace {

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> vision_rope(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin) {
#ifdef RLLOOP_CUDA
  if (qkv.is_cuda() && cuda_kernel_enabled("vision_rope") && cuda::vision_rope_kernel_accepts(qkv, cos, sin)) {
    return cuda::vision_rope(qkv, cos, sin);
  }
#endif
  const at::Tensor cos_h = cos.unsqueeze(1), sin_h = sin.unsqueeze(1);  // [N, 1, d]
  const auto rotate = [&](const at::Tensor& t) {
    const at::Tensor f = t.to(at::kFloat);
    return (f * cos_h + rotate_half(f) * sin_h).to(qkv.scalar_type());
  };
  return {rotate(qkv.select(1, 0)), rotate(qkv.select(1, 1))};
}

}  // namespace rlloop
