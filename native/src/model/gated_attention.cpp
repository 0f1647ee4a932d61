#include "model/gated_attention.h"

#include <ATen/SDPBackend.h>

#include <cmath>

#include "model/head_norm_rope.h"

namespace rlloop {
namespace {

// Whether SDPA, asked for causal attention with k and v's fewer heads shared (enable_gqa), runs the flash or the
// cuDNN kernel, which read the shared heads in place; any other choice (the memory-efficient kernel has no GQA and
// would give way to the math one) means repeating k and v instead.
bool shared_heads_in_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  if (!q.is_cuda()) return false;
  const auto backend = static_cast<at::SDPBackend>(
      at::_fused_sdp_choice(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true, scale, /*enable_gqa=*/true));
  return backend == at::SDPBackend::flash_attention || backend == at::SDPBackend::cudnn_attention;
}

}  // namespace

GatedAttention::GatedAttention(const TextConfig& c, const WeightScope& scope)
    : heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim),
      eps_(c.rms_norm_eps),
      qkv_proj_(scope,
                {{"q_proj", 2 * c.num_attention_heads * c.head_dim},
                 {"k_proj", c.num_key_value_heads * c.head_dim},
                 {"v_proj", c.num_key_value_heads * c.head_dim}},
                c.hidden_size),
      o_proj_(scope, "o_proj", c.hidden_size, c.num_attention_heads * c.head_dim),
      q_norm_(scope.sub("q_norm").get("weight", {c.head_dim})),
      k_norm_(scope.sub("k_norm").get("weight", {c.head_dim})) {}

at::Tensor GatedAttention::forward(const at::Tensor& x, const RotaryTables& rotary, const std::string* adapter) const {
  const int64_t B = x.size(0), L = x.size(1), H = heads_, KV = kv_heads_, D = head_dim_;
  // 1. q_proj -> [B, L, H, 2D]; per head the first D channels are the query, the next D the output gate.
  const std::vector<at::Tensor> projected = qkv_proj_.forward_split(x, adapter);  // views of one [B, L, Σ] output
  at::Tensor q_and_gate = projected[0].view({B, L, H, 2 * D});
  at::Tensor q = q_and_gate.narrow(-1, 0, D);
  at::Tensor gate = q_and_gate.narrow(-1, D, D).reshape({B, L, H * D});
  // 2-3. per-head norms and partial RoPE on q and k, then [B, heads, L, D]
  q = normed_rotated_heads(q, q_norm_, eps_, rotary).transpose(1, 2);
  at::Tensor k = normed_rotated_heads(projected[1].view({B, L, KV, D}), k_norm_, eps_, rotary).transpose(1, 2);
  at::Tensor v = projected[2].view({B, L, KV, D}).transpose(1, 2);
  // 4. GQA: query head h reads kv head h / (H / KV) (each kv head repeated consecutively, as repeat_kv). The flash
  // and cuDNN kernels read the shared heads themselves when SDPA would pick one of them for this call; elsewhere (the
  // memory-efficient kernel, float32's, has no GQA; the CPU) k and v are repeated (copies of [B, H, L, D] each).
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const bool gqa_in_kernel = KV != H && shared_heads_in_kernel(q, k, v, scale);
  if (KV != H && !gqa_in_kernel) {
    const int64_t rep = H / KV;
    k = k.unsqueeze(2).expand({B, KV, rep, L, D}).reshape({B, H, L, D});
    v = v.unsqueeze(2).expand({B, KV, rep, L, D}).reshape({B, H, L, D});
  }
  // 5. causal softmax attention, scale D^-0.5 (SDPA: same maths as the eager path, flash/efficient kernels on GPU)
  at::Tensor o = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                                  scale, /*enable_gqa=*/gqa_in_kernel);
  // 6. [B, L, H*D] head-major, output gate, o_proj
  o = o.transpose(1, 2).reshape({B, L, H * D});
  return o_proj_.forward(o * at::sigmoid(gate), adapter);
}

}  // namespace rlloop
