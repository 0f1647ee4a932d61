// The LoRA linear product of a frozen weight, y = x Wᵀ + (x aᵀ) bᵀ, with a backward written out rather than left to
// autograd: autograd would compute the input gradient of the base product and of the adapter's product as two
// tensors and add them (one more pass over an [rows, in] tensor: ~0.5 GB a step for a down_proj at the 9B shapes);
// here the adapter's part is computed first and the base GEMM accumulates onto it in its epilogue (beta = 1).
// a [r, in] and b [out, r] are the adapter's factors in the compute dtype, the scale already on b; gradients flow to
// them (and through their casts to the float32 masters); W gets none.
#pragma once
#include <ATen/ATen.h>

namespace rlloop {

// x2 [rows, in], weight [out, in] (frozen), a [r, in], b [out, r] -> [rows, out]. Differentiable in x2, a, b.
at::Tensor lora_matmul(const at::Tensor& x2, const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b);

}  // namespace rlloop
