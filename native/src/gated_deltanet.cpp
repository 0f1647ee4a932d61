#include "gated_deltanet.h"

#include <cmath>

#include "delta_rule_chunks.h"
#include "gdn_ops.h"
#include "profiler.h"
#include "rms_norm.h"

namespace rlloop {

GatedDeltaNet::GatedDeltaNet(const TextConfig& c, const WeightScope& scope)
    : key_heads_(c.linear_num_key_heads),
      value_heads_(c.linear_num_value_heads),
      key_dim_(c.linear_key_head_dim),
      value_dim_(c.linear_value_head_dim),
      conv_kernel_(c.linear_conv_kernel_dim),
      eps_(c.rms_norm_eps),
      in_proj_qkv_(scope, "in_proj_qkv", c.linear_conv_dim(), c.hidden_size),
      in_proj_z_(scope, "in_proj_z", c.linear_value_dim(), c.hidden_size),
      in_proj_b_(scope, "in_proj_b", c.linear_num_value_heads, c.hidden_size),
      in_proj_a_(scope, "in_proj_a", c.linear_num_value_heads, c.hidden_size),
      out_proj_(scope, "out_proj", c.hidden_size, c.linear_value_dim()),
      conv_weight_(scope.sub("conv1d").get("weight", {c.linear_conv_dim(), 1, c.linear_conv_kernel_dim})),
      A_log_(scope.get("A_log", {c.linear_num_value_heads})),
      dt_bias_(scope.get("dt_bias", {c.linear_num_value_heads})),
      norm_weight_(scope.sub("norm").get("weight", {c.linear_value_head_dim})) {}

namespace {
// Repeats each of the h heads r times consecutively (repeat_interleave on dim 1): [B, h, L, d] -> [B, h*r, L, d].
at::Tensor repeat_heads(const at::Tensor& x, int64_t r) {
  if (r == 1) return x;
  const int64_t B = x.size(0), h = x.size(1), L = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({B, h, r, L, d}).reshape({B, h * r, L, d});
}

at::Tensor l2_normalise(const at::Tensor& x) { return x * at::rsqrt((x * x).sum(-1, /*keepdim=*/true) + 1e-6); }

// [B, L, h, d] (any float dtype) -> [B, h, L + pad, d] float32, contiguous, zeros in the padding: one strided read
// and one write, so every later elementwise op runs on a dense layout.
at::Tensor heads_major(const at::Tensor& x, int64_t pad) {
  return at::constant_pad_nd(x.to(at::kFloat).transpose(1, 2), {0, 0, 0, pad}).contiguous();
}
}  // namespace

at::Tensor GatedDeltaNet::forward(const at::Tensor& x_in, const at::Tensor& padding_mask, const std::string* adapter) const {
  const auto dtype = x_in.scalar_type();
  at::Tensor x = padding_mask.defined() ? x_in * padding_mask.unsqueeze(-1) : x_in;
  const int64_t B = x.size(0), L = x.size(1), Hk = key_heads_, Hv = value_heads_, dk = key_dim_, dv = value_dim_;

  at::Tensor mixed = in_proj_qkv_.forward(x, adapter);                       // [B, L, conv_dim]
  at::Tensor z = in_proj_z_.forward(x, adapter).view({B, L, Hv, dv});
  at::Tensor b = in_proj_b_.forward(x, adapter);                             // [B, L, Hv]
  at::Tensor a = in_proj_a_.forward(x, adapter);                             // [B, L, Hv]

  mixed = causal_conv_silu(mixed.contiguous(), conv_weight_);              // [B, L, conv_dim]

  at::Tensor q = mixed.narrow(-1, 0, Hk * dk).reshape({B, L, Hk, dk});
  at::Tensor k = mixed.narrow(-1, Hk * dk, Hk * dk).reshape({B, L, Hk, dk});
  at::Tensor v = mixed.narrow(-1, 2 * Hk * dk, Hv * dv).reshape({B, L, Hv, dv});

  at::Tensor beta = at::sigmoid(b);                                          // model dtype, as transformers
  at::Tensor g = -at::exp(A_log_.to(at::kFloat)) * at::softplus(a.to(at::kFloat) + dt_bias_, 1.0, 20.0);

  at::Tensor core;
  {
    ProfileRange range("gdn.core");
    core = chunk_gated_delta_rule(q, k, v, g, beta).to(dtype);
  }
  core = gated_rms_norm(core, z, norm_weight_, eps_).reshape({B, L, Hv * dv});
  return out_proj_.forward(core, adapter);
}

at::Tensor chunk_gated_delta_rule(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                  const at::Tensor& g_in, const at::Tensor& beta_in, int64_t C) {
  const int64_t B = k_in.size(0), L = k_in.size(1), Hk = k_in.size(2), dk = k_in.size(3), H = v_in.size(2),
                dv = v_in.size(3);
  // L padded up to a multiple of C with zeros (g = 0: no decay; beta = 0: no update), then split into N chunks.
  const int64_t pad = (C - L % C) % C, N = (L + pad) / C;
  // [B, H, L + pad, d] float32; q and k L2-normalised per key head, q scaled by dk^-0.5, then repeated to the
  // value heads (each key head serves H / Hk consecutive value heads)
  at::Tensor q = repeat_heads(l2_normalise(heads_major(q_in, pad)) * (1.0 / std::sqrt(static_cast<double>(dk))), H / Hk);
  at::Tensor k = repeat_heads(l2_normalise(heads_major(k_in, pad)), H / Hk);
  at::Tensor v = heads_major(v_in, pad);
  at::Tensor beta = at::constant_pad_nd(beta_in.to(at::kFloat).transpose(1, 2), {0, pad});  // [B, H, L + pad]
  at::Tensor g = at::constant_pad_nd(g_in.to(at::kFloat).transpose(1, 2), {0, pad});
  at::Tensor o = delta_rule_chunks(q.reshape({B, H, N, C, dk}), k.reshape({B, H, N, C, dk}), v.reshape({B, H, N, C, dv}),
                                   beta.reshape({B, H, N, C}), g.reshape({B, H, N, C}));
  return o.reshape({B, H, N * C, dv}).narrow(2, 0, L).transpose(1, 2).contiguous();  // [B, L, H, dv]
}

}  // namespace rlloop
