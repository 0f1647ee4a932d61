#include "kernels/head_norm_rope.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <optional>

#include "kernels/device_helpers.cuh"

namespace rlloop::cuda {
namespace {

// One warp per head vector, eight a block, as the RMSNorm kernels (kernels/rms_norm.cu). A lane's first pack holds
// channels lane·8 .. lane·8 + 7; with rot ≤ 256 every rotated channel is in a first pack, and channel i's partner in
// the rotation (i ± rot/2) is in lane lane ± rot/16, fetched with a shuffle.
constexpr int kRowsPerBlock = 8;
constexpr int kThreads = kWarp * kRowsPerBlock;
constexpr int kStride = kWarp * kVec;

// Where head vector `row` of x starts: (row / heads)·token_stride + (row % heads)·head_stride elements.
struct HeadRows {
  int64_t heads;
  int64_t head_stride;
  int64_t token_stride;
};

struct Row {
  int64_t index;  // the head vector
  int64_t token;  // its token: the row of cos and sin
  int lane;
};

__device__ __forceinline__ Row this_row(HeadRows layout) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  return {index, index / layout.heads, static_cast<int>(threadIdx.x % kWarp)};
}

template <typename T>
__device__ __forceinline__ const T* head_of(const T* x, HeadRows layout, const Row& row) {
  return x + row.token * layout.token_stride + (row.index % layout.heads) * layout.head_stride;
}

// Each lane gets its rotation partner's eight values (partner channel i + rot/2 below rot/2, i − rot/2 from there to
// rot); lanes past the rotated channels get their own. Every lane of the warp must call it.
__device__ __forceinline__ void partner_values(const float (&mine)[kVec], int lane, int rot, float (&theirs)[kVec]) {
  const int c0 = lane * kVec, half = rot / 2, shift = half / kVec;
  const int source = c0 >= rot ? lane : (c0 < half ? lane + shift : lane - shift);
#pragma unroll
  for (int e = 0; e < kVec; ++e) theirs[e] = __shfl_sync(0xffffffffu, mine[e], source);
}

template <typename T>
__device__ __forceinline__ void load_floats(const T* p, float (&v)[kVec]) {
  const Pack<T> pack = load_pack(p);
#pragma unroll
  for (int e = 0; e < kVec; ++e) v[e] = static_cast<float>(pack.v[e]);
}

template <typename T>
__device__ __forceinline__ void store_floats(T* p, const float (&v)[kVec]) {
  Pack<T> pack;
#pragma unroll
  for (int e = 0; e < kVec; ++e) pack.v[e] = static_cast<T>(v[e]);
  store_pack(p, pack);
}

// A pass-through channel's gradient: dy + 0, as the narrows' backward adds it (a −0 becomes +0).
template <typename T>
__device__ __forceinline__ void load_gradient(const T* p, float (&g)[kVec]) {
  load_floats(p, g);
#pragma unroll
  for (int e = 0; e < kVec; ++e) g[e] = __fadd_rn(g[e], 0.0f);
}

// n = cast(x·r·w1) of one pack, as the zero-centred norm kernel computes it.
template <typename T>
__device__ __forceinline__ void normed_pack(const T* x, const float* w1, float r, int c, float (&n)[kVec]) {
  const Pack<T> xp = load_pack(x + c);
  const Pack<float> wp = load_pack(w1 + c);
#pragma unroll
  for (int e = 0; e < kVec; ++e) n[e] = rounded<T>(static_cast<float>(xp.v[e]) * r * wp.v[e]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    head_norm_rope_forward_kernel(const T* __restrict__ x, HeadRows layout, const float* __restrict__ w1,
                                  const T* __restrict__ cos, const T* __restrict__ sin, T* __restrict__ y,
                                  float* __restrict__ r_out, int64_t rows, int D, int rot, float eps) {
  const Row row = this_row(layout);
  if (row.index >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const T* xr = head_of(x, layout, row);
  T* yr = y + row.index * D;
  const float r = rsqrtf(warp_sum_of_squares(xr, D, row.lane) * (1.0f / static_cast<float>(D)) + eps);
  if (row.lane == 0) r_out[row.index] = r;
  const int c0 = row.lane * kVec, half = rot / 2;
  float n[kVec] = {};
  if (c0 < D) normed_pack(xr, w1, r, c0, n);
  float partner[kVec];
  partner_values(n, row.lane, rot, partner);
  if (c0 < rot) {
    float cs[kVec], sn[kVec];
    load_floats(cos + row.token * rot + c0, cs);
    load_floats(sin + row.token * rot + c0, sn);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float rotated_half = c0 + e < half ? -partner[e] : partner[e];
      n[e] = __fadd_rn(rounded<T>(__fmul_rn(n[e], cs[e])), rounded<T>(__fmul_rn(rotated_half, sn[e])));
    }
  }
  if (c0 < D) store_floats(yr + c0, n);
  for (int c = c0 + kStride; c < D; c += kStride) {
    normed_pack(xr, w1, r, c, n);
    store_floats(yr + c, n);
  }
}

// Through the rotation's transpose first, with autograd's roundings over the ATen composition: gc = cast(dy·cos),
// gs = cast(dy·sin), grad_n_i = cast(gc_i + gs_{i+half}) below half, cast(gc_i − gs_{i−half}) up to rot, dy_i past
// it, each plus +0 (the narrows' backward adds zeros: a −0 becomes +0); then the zero-centred norm's backward,
// dx = r·(g − x̂·mean(g·x̂)) with g = grad_n·w1, x̂ = x·r.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    head_norm_rope_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, HeadRows layout,
                                   const float* __restrict__ w1, const float* __restrict__ r_in,
                                   const T* __restrict__ cos, const T* __restrict__ sin, T* __restrict__ dx,
                                   int64_t rows, int D, int rot) {
  const Row row = this_row(layout);
  if (row.index >= rows) return;
  const T* xr = head_of(x, layout, row);
  const T* dyr = dy + row.index * D;
  T* dxr = dx + row.index * D;
  const float r = r_in[row.index];
  const int c0 = row.lane * kVec, half = rot / 2;
  float grad_n[kVec] = {}, gs[kVec] = {};  // the first pack's gradient of n, and its dy·sin
  if (c0 < D) load_floats(dyr + c0, grad_n);
  float cs[kVec] = {};
  if (c0 < rot) {
    float sn[kVec];
    load_floats(cos + row.token * rot + c0, cs);
    load_floats(sin + row.token * rot + c0, sn);
#pragma unroll
    for (int e = 0; e < kVec; ++e) gs[e] = rounded<T>(__fmul_rn(grad_n[e], sn[e]));
  }
  float partner[kVec];
  partner_values(gs, row.lane, rot, partner);
  if (c0 < rot) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float gc = rounded<T>(__fmul_rn(grad_n[e], cs[e]));
      grad_n[e] = rounded<T>(__fadd_rn(gc, c0 + e < half ? partner[e] : -partner[e]));
    }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) grad_n[e] = __fadd_rn(grad_n[e], 0.0f);
  float dot = 0.0f;
  float xs[kVec], ws[kVec];
  if (c0 < D) {
    load_floats(xr + c0, xs);
    load_floats(w1 + c0, ws);
#pragma unroll
    for (int e = 0; e < kVec; ++e) dot += grad_n[e] * ws[e] * (xs[e] * r);
  }
  for (int c = c0 + kStride; c < D; c += kStride) {
    float g[kVec];
    load_gradient(dyr + c, g);
    load_floats(xr + c, xs);
    load_floats(w1 + c, ws);
#pragma unroll
    for (int e = 0; e < kVec; ++e) dot += g[e] * ws[e] * (xs[e] * r);
  }
  const float mean_dot = warp_sum(dot) * (1.0f / static_cast<float>(D));
  const auto input_gradient = [&](const float (&g)[kVec], int c) {
    load_floats(xr + c, xs);
    load_floats(w1 + c, ws);
    float out[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float gw = g[e] * ws[e], xhat = xs[e] * r;
      out[e] = r * (gw - xhat * mean_dot);
    }
    store_floats(dxr + c, out);
  };
  if (c0 < D) input_gradient(grad_n, c0);
  for (int c = c0 + kStride; c < D; c += kStride) {
    float g[kVec];
    load_gradient(dyr + c, g);
    input_gradient(g, c);
  }
}

// x's head vectors as the kernels read them; nullopt where they cannot.
std::optional<HeadRows> head_rows_of(const at::Tensor& x) {
  if (x.dim() < 3 || x.stride(-1) != 1) return std::nullopt;
  const int64_t D = x.size(-1), heads = x.size(-2), head_stride = x.stride(-2), token_stride = x.stride(-3);
  if (head_stride % kVec != 0 || token_stride % kVec != 0 || head_stride < D || token_stride < heads * head_stride)
    return std::nullopt;
  for (int64_t d = x.dim() - 4; d >= 0; --d)
    if (x.size(d) != 1 && x.stride(d) != x.stride(d + 1) * x.size(d + 1)) return std::nullopt;
  return HeadRows{heads, head_stride, token_stride};
}

// f(T{}) for x's element type, float32 or bfloat16 (the two head_norm_rope_accepts takes).
template <typename F>
void with_element_type(at::ScalarType type, F&& f) {
  if (type == at::kFloat) f(float{});
  else f(at::BFloat16{});
}

struct Launch {
  HeadRows layout;
  int64_t rows;
  int D, rot;
  dim3 blocks;
  cudaStream_t stream;
};

Launch launch_for(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(head_norm_rope_accepts(x, cos, sin), "head norm + rope kernel: x ", x.sizes(), " / ", x.strides(),
              ", cos ", cos.sizes(), " or sin ", sin.sizes(), " outside what the kernels take (kernels/head_norm_rope.h)");
  const int64_t D = x.size(-1);
  TORCH_CHECK(w1.dim() == 1 && w1.size(0) == D && w1.scalar_type() == at::kFloat && w1.is_contiguous() && pack_aligned(w1),
              "head norm + rope kernel: w1 must be a contiguous, aligned float32 [", D, "]");
  const int64_t rows = x.numel() / D;
  return {*head_rows_of(x), rows, static_cast<int>(D), static_cast<int>(cos.size(-1)),
          dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock)), at::cuda::getCurrentCUDAStream()};
}

}  // namespace

bool head_norm_rope_accepts(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (!x.is_cuda() || (x.scalar_type() != at::kBFloat16 && x.scalar_type() != at::kFloat) || x.numel() == 0) return false;
  const int64_t D = x.size(-1);
  if (D % kVec != 0 || !pack_aligned(x) || !head_rows_of(x)) return false;
  const int64_t rot = cos.size(-1), tokens = x.numel() / (D * x.size(-2));
  if (rot % (2 * kVec) != 0 || rot == 0 || rot > D || rot > kStride) return false;
  for (const at::Tensor* t : {&cos, &sin})
    if (!t->is_cuda() || t->scalar_type() != x.scalar_type() || !t->is_contiguous() || t->size(-1) != rot ||
        t->numel() != tokens * rot || !pack_aligned(*t))
      return false;
  return true;
}

std::tuple<at::Tensor, at::Tensor> head_norm_rope_forward(const at::Tensor& x, const at::Tensor& w1, double eps,
                                                          const at::Tensor& cos, const at::Tensor& sin) {
  const Launch l = launch_for(x, w1, cos, sin);
  at::Tensor y = at::empty(x.sizes(), x.options()), r = at::empty({l.rows}, x.options().dtype(at::kFloat));
  with_element_type(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    head_norm_rope_forward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        x.data_ptr<scalar_t>(), l.layout, w1.data_ptr<float>(), cos.data_ptr<scalar_t>(), sin.data_ptr<scalar_t>(),
        y.data_ptr<scalar_t>(), r.data_ptr<float>(), l.rows, l.D, l.rot, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, r};
}

at::Tensor head_norm_rope_backward(const at::Tensor& grad_y_in, const at::Tensor& x, const at::Tensor& w1,
                                   const at::Tensor& r, const at::Tensor& cos, const at::Tensor& sin) {
  const Launch l = launch_for(x, w1, cos, sin);
  const at::Tensor grad_y = packed_gradient(grad_y_in, x);
  TORCH_CHECK(grad_y.sizes() == x.sizes(), "head norm + rope backward: the output gradient must have x's shape");
  TORCH_CHECK(r.scalar_type() == at::kFloat && r.is_contiguous() && r.numel() == l.rows,
              "head norm + rope backward: r must be the forward's float32 [rows]");
  at::Tensor dx = at::empty(x.sizes(), x.options());
  with_element_type(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    head_norm_rope_backward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        grad_y.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), l.layout, w1.data_ptr<float>(), r.data_ptr<float>(),
        cos.data_ptr<scalar_t>(), sin.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(), l.rows, l.D, l.rot);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

}  // namespace rlloop::cuda
