#include "model/gated_deltanet.h"

#include "delta_rule/aten.h"
#include "delta_rule/fused.h"
#include "diagnostics/profiler.h"
#include "model/gdn_ops.h"
#include "model/qkv_heads.h"
#include "model/rms_norm.h"

namespace rlloop {

GatedDeltaNet::GatedDeltaNet(const TextConfig& c, const WeightScope& scope)
    : key_heads_(c.linear_num_key_heads),
      value_heads_(c.linear_num_value_heads),
      key_dim_(c.linear_key_head_dim),
      value_dim_(c.linear_value_head_dim),
      conv_kernel_(c.linear_conv_kernel_dim),
      eps_(c.rms_norm_eps),
      in_proj_(scope,
               {{"in_proj_qkv", c.linear_conv_dim()},
                {"in_proj_z", c.linear_value_dim()},
                {"in_proj_b", c.linear_num_value_heads},
                {"in_proj_a", c.linear_num_value_heads}},
               c.hidden_size),
      out_proj_(scope, "out_proj", c.hidden_size, c.linear_value_dim()),
      conv_weight_(scope.sub("conv1d").get("weight", {c.linear_conv_dim(), 1, c.linear_conv_kernel_dim})),
      A_log_(scope.get("A_log", {c.linear_num_value_heads})),
      dt_bias_(scope.get("dt_bias", {c.linear_num_value_heads})),
      norm_weight_(scope.sub("norm").get("weight", {c.linear_value_head_dim})) {}

at::Tensor GatedDeltaNet::forward(const at::Tensor& x, const std::string* adapter) const {
  const auto dtype = x.scalar_type();
  const int64_t B = x.size(0), L = x.size(1), Hk = key_heads_, Hv = value_heads_, dk = key_dim_, dv = value_dim_;

  const std::vector<at::Tensor> projected = in_proj_.forward_split(x, adapter);  // views of one [B, L, Σ] output
  at::Tensor mixed = projected[0];                                           // [B, L, conv_dim]
  at::Tensor z = projected[1].view({B, L, Hv, dv});
  const at::Tensor& b = projected[2];                                        // [B, L, Hv]
  const at::Tensor& a = projected[3];                                        // [B, L, Hv]

  mixed = causal_conv_silu(mixed, conv_weight_);                           // [B, L, conv_dim]: q, k, v heads

  at::Tensor beta = at::sigmoid(b);                                          // model dtype, as transformers
  at::Tensor g = -at::exp(A_log_.to(at::kFloat)) * at::softplus(a.to(at::kFloat) + dt_bias_, 1.0, 20.0);

  at::Tensor core;
  {
    ProfileRange range("gdn.core");
    core = chunk_gated_delta_rule(mixed, Hk, dk, dv, g, beta);
  }
  // the core's output rounded to the model dtype (as transformers) in the norm's pass, which hands back its gradient
  core = gated_rms_norm_of_heads_major(core, L, z, norm_weight_, eps_, dtype).reshape({B, L, Hv * dv});
  return out_proj_.forward(core, adapter);
}

at::Tensor chunk_gated_delta_rule(const at::Tensor& mixed, int64_t key_heads, int64_t key_dim, int64_t value_dim,
                                  const at::Tensor& g_in, const at::Tensor& beta_in, int64_t C) {
  const int64_t B = mixed.size(0), L = mixed.size(1), H = g_in.size(2);
  // L padded up to a multiple of C with zeros (g = 0: no decay; beta = 0: no update), then split into N chunks.
  const int64_t pad = (C - L % C) % C, N = (L + pad) / C;
  const QkvHeads heads = qkv_heads(mixed, key_heads, key_dim, H, value_dim, pad);  // [B, H, L + pad, d] float32
  at::Tensor beta = at::constant_pad_nd(beta_in.to(at::kFloat).transpose(1, 2), {0, pad});  // [B, H, L + pad]
  at::Tensor g = at::constant_pad_nd(g_in.to(at::kFloat).transpose(1, 2), {0, pad});
  const at::Tensor q = heads.q.reshape({B, H, N, C, key_dim}), k = heads.k.reshape({B, H, N, C, key_dim}),
                   v = heads.v.reshape({B, H, N, C, value_dim});
  beta = beta.reshape({B, H, N, C});
  g = g.reshape({B, H, N, C});
  at::Tensor o = delta_rule_kernels_apply(q, v) ? delta_rule_kernels(q, k, v, beta, g) : delta_rule_chunks(q, k, v, beta, g);
  return o.reshape({B, H, N * C, value_dim});
}

}  // namespace rlloop
