// The delta rule's kernel sequences (delta_rule_programs.h), written once for both executors: `run(program,
// blocks, shared_floats)` launches on the GPU (delta_rule_kernels.cu) or loops on the CPU (delta_rule_kernels.cpp).
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <array>

#include "delta_rule_programs.h"

namespace rlloop::delta_rule {

// Columns of the state a scan block carries: the scans run B·H·(D / BV) blocks.
inline int scan_columns(int64_t D) { return static_cast<int>(std::min<int64_t>(D, 32)); }

struct Shape {
  int64_t sequences, N, D, chunks;
  explicit Shape(const at::Tensor& q)  // [B, H, N, 64, D]
      : sequences(q.size(0) * q.size(1)), N(q.size(2)), D(q.size(4)), chunks(sequences * N) {}
};

inline const float* in(const at::Tensor& t) { return t.data_ptr<float>(); }
inline float* out(at::Tensor& t) { return t.data_ptr<float>(); }

// O (and, when `states` is given, every chunk's starting state [B, H, N, D, D], for the backward).
template <class Run>
at::Tensor forward(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                   const at::Tensor& g, at::Tensor* states) {
  const Shape s(q);
  const int D = static_cast<int>(s.D), BV = scan_columns(s.D);
  at::Tensor U = at::empty_like(v), W = at::empty_like(k), V = at::empty_like(v), O = at::empty_like(v);
  at::Tensor S = at::empty({q.size(0), q.size(1), s.N, s.D, s.D}, q.options());
  run(Prep{in(q), in(k), in(v), in(beta), in(g), out(U), out(W), nullptr, D}, s.chunks, Prep::shared_floats(D));
  run(ScanForward{in(U), in(W), in(k), in(g), out(V), out(S), static_cast<int>(s.N), D, BV}, s.sequences * (D / BV),
      ScanForward::shared_floats(D, BV));
  run(Output{in(q), in(k), in(g), in(V), in(S), out(O), D}, s.chunks, Output::shared_floats(D));
  if (states) *states = S;
  return O;
}

// Gradients of q, k, v, β and g from those of O, the chunks' starting states saved by forward.
template <class Run>
std::array<at::Tensor, 5> backward(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& beta, const at::Tensor& g, const at::Tensor& states,
                                   const at::Tensor& dO) {
  const Shape s(q);
  const int D = static_cast<int>(s.D), BV = scan_columns(s.D);
  const auto chunk_matrices = [&] { return at::empty({q.size(0), q.size(1), s.N, kChunk, kChunk}, q.options()); };
  at::Tensor U = at::empty_like(v), W = at::empty_like(k), intra = chunk_matrices();
  run(Prep{in(q), in(k), in(v), in(beta), in(g), out(U), out(W), out(intra), D}, s.chunks, Prep::shared_floats(D));

  at::Tensor dV = at::empty_like(v), dS_next = at::empty_like(states);
  run(ScanBackward{in(q), in(k), in(g), in(W), in(intra), in(dO), out(dV), out(dS_next), static_cast<int>(s.N), D, BV},
      s.sequences * (D / BV), ScanBackward::shared_floats(D, BV));

  at::Tensor dKend = at::empty_like(k), dQd = at::empty_like(q), dW = at::empty_like(k), dintra = chunk_matrices();
  at::Tensor ddec = at::empty({q.size(0), q.size(1), s.N}, q.options());
  run(StateGrads{in(U), in(W), in(states), in(dS_next), in(dO), in(dV), out(dKend), out(dQd), out(dW), out(dintra), out(ddec), D},
      s.chunks, StateGrads::shared_floats(D));
  dS_next.reset();

  at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  at::Tensor grad_beta = at::empty_like(beta), grad_g = at::empty_like(g);
  run(IntraGrads{in(q), in(k), in(v), in(beta), in(g), in(U), in(W), in(intra), in(dV), in(dW), in(dKend), in(dQd),
                 in(dintra), in(ddec), out(grad_q), out(grad_k), out(grad_v), out(grad_beta), out(grad_g), D},
      s.chunks, IntraGrads::shared_floats(D));
  return {grad_q, grad_k, grad_v, grad_beta, grad_g};
}

}  // namespace rlloop::delta_rule
