// The delta rule's kernel sequences (delta_rule/programs.h), written once for both executors: `run(program,
// blocks)` launches on the GPU (delta_rule/fused_cuda.cu) or loops on the CPU (delta_rule/fused.cpp). Each build
// instantiates the head sizes it supports (the programs' shapes are compile-time).
#pragma once
#include <ATen/ATen.h>

#include <array>

#include "delta_rule/forward_saved.h"
#include "delta_rule/programs.h"

namespace rlloop::delta_rule {

// Columns of the state a scan block carries: the scans run B·H·(D / BV) blocks.
template <int D>
constexpr int kScanColumns = D < 64 ? D : 64;

template <int... Dims>
constexpr bool head_size_in(int64_t D) {
  return ((D == Dims) || ...);
}

struct Shape {
  int64_t sequences, N, chunks;
  explicit Shape(const at::Tensor& q)  // [B, H, N, 64, D]
      : sequences(q.size(0) * q.size(1)), N(q.size(2)), chunks(sequences * N) {}
};

inline const float* in(const at::Tensor& t) { return t.data_ptr<float>(); }
inline float* out(at::Tensor& t) { return t.data_ptr<float>(); }

template <int D, class Run>
at::Tensor forward_for(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& beta, const at::Tensor& g, ForwardSaved* saved) {
  constexpr int BV = kScanColumns<D>;
  const Shape s(q);
  at::Tensor U = at::empty_like(v), W = at::empty_like(k), Kend = at::empty_like(k);
  at::Tensor T = saved ? at::empty({q.size(0), q.size(1), s.N, kChunk, kChunk}, q.options()) : at::Tensor();
  run(Prep<D>{in(k), in(v), in(beta), in(g), out(U), out(W), out(Kend), saved ? out(T) : nullptr}, s.chunks);
  at::Tensor V = at::empty_like(v), S = at::empty({q.size(0), q.size(1), s.N, D, D}, q.options());
  run(ScanForward<D, BV>{in(U), in(W), in(Kend), in(g), out(V), out(S), static_cast<int>(s.N)}, s.sequences * (D / BV));
  Kend.reset();
  at::Tensor O = at::empty_like(v);
  run(Output<D>{in(q), in(k), in(g), in(V), in(S), out(O)}, s.chunks);
  if (saved) *saved = {S, U, W, T};
  return O;
}

template <int D, class Run>
std::array<at::Tensor, 5> backward_for(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const at::Tensor& beta, const at::Tensor& g, const ForwardSaved& saved,
                                       const at::Tensor& dO) {
  constexpr int BV = kScanColumns<D>;
  const Shape s(q);
  const auto chunk_matrices = [&] { return at::empty({q.size(0), q.size(1), s.N, kChunk, kChunk}, q.options()); };
  const at::Tensor &U = saved.U, &W = saved.W, &states = saved.states;
  TORCH_CHECK(saved.T.defined(), "delta rule kernels: the backward needs the forward's T (a forward with `saved`)");
  at::Tensor Kend = at::empty_like(k), Qd = at::empty_like(q), intra = chunk_matrices();
  run(ChunkTerms<D>{in(q), in(k), in(g), out(intra), out(Qd), out(Kend)}, s.chunks);

  at::Tensor dV = at::empty_like(v), dS_next = at::empty_like(states);
  run(ScanBackward<D, BV>{in(Kend), in(Qd), in(W), in(intra), in(g), in(dO), out(dV), out(dS_next), static_cast<int>(s.N)},
      s.sequences * (D / BV));
  Kend.reset();
  Qd.reset();

  at::Tensor dKend = at::empty_like(k), dQd = at::empty_like(q), dW = at::empty_like(k), dintra = chunk_matrices();
  at::Tensor ddec = at::empty({q.size(0), q.size(1), s.N}, q.options());
  run(StateGrads<D>{in(U), in(W), in(states), in(dS_next), in(dO), in(dV), out(dKend), out(dQd), out(dW), out(dintra), out(ddec)},
      s.chunks);
  dS_next.reset();

  at::Tensor grad_q = at::empty_like(q), grad_k = at::empty_like(k), grad_v = at::empty_like(v);
  at::Tensor grad_beta = at::empty_like(beta), grad_g = at::empty_like(g);
  run(IntraGrads<D>{in(q), in(k), in(v), in(beta), in(g), in(U), in(W), in(saved.T), in(intra), in(dV), in(dW), in(dKend),
                    in(dQd), in(dintra), in(ddec), out(grad_q), out(grad_k), out(grad_v), out(grad_beta), out(grad_g)},
      s.chunks);
  return {grad_q, grad_k, grad_v, grad_beta, grad_g};
}

// O (and, when `saved` is given, what the backward reads: forward_saved.h), for q, k, v [B, H, N, 64, D], β and g
// [B, H, N, 64]; D one of Dims.
template <int... Dims, class Run>
at::Tensor forward(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                   const at::Tensor& g, ForwardSaved* saved) {
  at::Tensor out;
  const bool done = ((q.size(4) == Dims && (out = forward_for<Dims>(run, q, k, v, beta, g, saved), true)) || ...);
  TORCH_CHECK(done, "delta rule kernels: no build for head size ", q.size(4));
  return out;
}

// Gradients of q, k, v, β and g from those of O, with what forward saved.
template <int... Dims, class Run>
std::array<at::Tensor, 5> backward(const Run& run, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& beta, const at::Tensor& g, const ForwardSaved& saved,
                                   const at::Tensor& dO) {
  std::array<at::Tensor, 5> grads;
  const bool done =
      ((q.size(4) == Dims && (grads = backward_for<Dims>(run, q, k, v, beta, g, saved, dO), true)) || ...);
  TORCH_CHECK(done, "delta rule kernels: no build for head size ", q.size(4));
  return grads;
}

}  // namespace rlloop::delta_rule
