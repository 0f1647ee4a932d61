#include "model/qkv_heads.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/qkv_heads.h"
#endif

namespace rlloop {
namespace {

constexpr double kNormEps = 1e-6;

// Repeats each of the h heads r times consecutively (repeat_interleave on dim 1): [B, h, L, d] -> [B, h*r, L, d].
at::Tensor repeat_heads(const at::Tensor& x, int64_t r) {
  if (r == 1) return x;
  const int64_t B = x.size(0), h = x.size(1), L = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({B, h, r, L, d}).reshape({B, h * r, L, d});
}

at::Tensor l2_normalise(const at::Tensor& x) { return x * at::rsqrt((x * x).sum(-1, /*keepdim=*/true) + kNormEps); }

// [B, L, h, d] (any float dtype) -> [B, h, L + pad, d] float32, contiguous, zeros in the padding: one strided read
// and one write, so every later elementwise op runs on a dense layout.
at::Tensor heads_major(const at::Tensor& x, int64_t pad) {
  return at::constant_pad_nd(x.to(at::kFloat).transpose(1, 2), {0, 0, 0, pad}).contiguous();
}

QkvHeads qkv_heads_aten(const at::Tensor& mixed, int64_t Hk, int64_t dk, int64_t H, int64_t dv, int64_t pad,
                        double q_scale) {
  const int64_t B = mixed.size(0), L = mixed.size(1);
  const at::Tensor q = mixed.narrow(-1, 0, Hk * dk).reshape({B, L, Hk, dk});
  const at::Tensor k = mixed.narrow(-1, Hk * dk, Hk * dk).reshape({B, L, Hk, dk});
  const at::Tensor v = mixed.narrow(-1, 2 * Hk * dk, H * dv).reshape({B, L, H, dv});
  return {repeat_heads(l2_normalise(heads_major(q, pad)) * q_scale, H / Hk), repeat_heads(l2_normalise(heads_major(k, pad)), H / Hk),
          heads_major(v, pad)};
}

#ifdef RLLOOP_CUDA
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct QkvHeadsFunction : public torch::autograd::Function<QkvHeadsFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& mixed, int64_t Hk, int64_t H, int64_t d,
                               int64_t padded_len, double q_scale) {
    auto out = cuda::qkv_heads_forward(mixed, Hk, H, d, padded_len, q_scale, kNormEps);
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined, not a float32 tensor of zeros
    ctx->save_for_backward({mixed});
    ctx->saved_data["shape"] = std::vector<int64_t>{Hk, H, d};
    ctx->saved_data["q_scale"] = q_scale;
    return {out[0], out[1], out[2]};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.qkv_heads");
    const at::Tensor mixed = ctx->get_saved_variables()[0];
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const double q_scale = ctx->saved_data["q_scale"].toDouble();
    at::Tensor grad = cuda::qkv_heads_backward(grads[0], grads[1], grads[2], mixed, shape[0], shape[1], shape[2],
                                               q_scale, kNormEps);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

QkvHeads qkv_heads(const at::Tensor& mixed, int64_t key_heads, int64_t key_dim, int64_t value_heads, int64_t value_dim,
                   int64_t pad) {
  const double q_scale = 1.0 / std::sqrt(static_cast<double>(key_dim));
#ifdef RLLOOP_CUDA
  if (cuda_kernel_enabled("qkv_heads") && key_dim == value_dim && cuda::qkv_heads_kernels_accept(mixed, key_heads, value_heads, key_dim)) {
    variable_list out = QkvHeadsFunction::apply(mixed, key_heads, value_heads, key_dim, mixed.size(1) + pad, q_scale);
    return {out[0], out[1], out[2]};
  }
#endif
  return qkv_heads_aten(mixed, key_heads, key_dim, value_heads, value_dim, pad, q_scale);
}

}  // namespace rlloop
