#include "rms_norm.h"

namespace rlloop {

at::Tensor zero_centred_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (normed * (weight.to(at::kFloat) + 1.0)).to(x.scalar_type());
}

at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& weight, double eps) {
  const auto dtype = x.scalar_type();
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = (xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(dtype);
  at::Tensor y = weight * normed;
  return (y * at::silu(gate.to(at::kFloat))).to(dtype);
}

}  // namespace rlloop
