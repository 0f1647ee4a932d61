// Gated DeltaNet's q, k, v as the chunked delta rule reads them: from the conv output mixed [B, L, 2·Hk·dk + H·dv]
// (q's Hk key heads, k's, then v's H value heads) to float32 heads-major [B, H, L + pad, d] with zeros in the
// padding; q and k L2-normalised per key head (eps 1e-6 inside the rsqrt, as transformers), q scaled by dk^-0.5,
// and key head j repeated to value heads j·H/Hk … (j+1)·H/Hk − 1. Differentiable in mixed. One CUDA kernel each
// way on GPUs (kernels/qkv_heads.h, when dk = dv); elsewhere, and with RLLOOP_KERNELS=0, the ATen formulation.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

struct QkvHeads {
  at::Tensor q, k, v;
};

QkvHeads qkv_heads(const at::Tensor& mixed, int64_t key_heads, int64_t key_dim, int64_t value_heads, int64_t value_dim,
                   int64_t pad);

}  // namespace rlloop
