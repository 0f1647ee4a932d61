#include "kernels/rms_norm.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/device_helpers.cuh"

namespace rlloop::cuda {
namespace {

// One warp per row, eight rows a block; each lane walks its row in packs of eight (the hidden size 4096 is 16
// packs a lane, a GDN head's 128 is half a warp's single pass). A row's second read in the same kernel mostly
// hits L1/L2: the rows are 256 B to 8 KiB.
constexpr int kRowsPerBlock = 8;
constexpr int kThreads = kWarp * kRowsPerBlock;
constexpr int kStride = kWarp * kVec;  // columns one pass of a warp covers

struct RowIndex {
  int64_t row;
  int lane;
};

__device__ __forceinline__ RowIndex row_index() {
  return {static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp, static_cast<int>(threadIdx.x % kWarp)};
}

// rsqrt(mean(x_f²) + eps) of one row, in every lane (ATen's mean multiplies the sum by 1/H).
template <typename T>
__device__ float row_rstd(const T* x, int H, int lane, float eps) {
  return rsqrtf(warp_sum_of_squares(x, H, lane) * (1.0f / static_cast<float>(H)) + eps);
}

// A row's scale (the padding mask's 0 or 1, in T), 1 without one.
template <typename T>
__device__ __forceinline__ float row_scale_of(const T* __restrict__ scale, int64_t row) {
  return scale ? static_cast<float>(scale[row]) : 1.0f;
}

// y = cast(cast(x·r·w1)·s): the norm then the row's scale in T, as the GDN's mask multiply after the norm rounds
// (exact for the mask's 0 and 1).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    zero_centred_forward_kernel(const T* __restrict__ x, const float* __restrict__ w1, const T* __restrict__ scale,
                                T* __restrict__ y, float* __restrict__ r_out, int64_t rows, int H, float eps) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const T* xr = x + at.row * H;
  T* yr = y + at.row * H;
  const float r = row_rstd(xr, H, at.lane, eps);
  const float s = row_scale_of(scale, at.row);
  if (at.lane == 0) r_out[at.row] = r;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> xp = load_pack(xr + c);
    const Pack<float> wp = load_pack(w1 + c);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(rounded<T>(static_cast<float>(xp.v[e]) * r * wp.v[e]) * s);
    store_pack(yr + c, o);
  }
}

// g = cast(dy·s)·w1, x̂ = x·r: dx = r·(g − x̂·mean(g·x̂)).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    zero_centred_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ w1,
                                 const T* __restrict__ scale, const float* __restrict__ r_in, T* __restrict__ dx,
                                 int64_t rows, int H) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  const float r = r_in[at.row];
  const float s = row_scale_of(scale, at.row);
  float dot = 0.0f;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> gp = load_pack(dy + base + c), xp = load_pack(x + base + c);
    const Pack<float> wp = load_pack(w1 + c);
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      dot += rounded<T>(static_cast<float>(gp.v[e]) * s) * wp.v[e] * (static_cast<float>(xp.v[e]) * r);
  }
  const float mean_dot = warp_sum(dot) * (1.0f / static_cast<float>(H));
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> gp = load_pack(dy + base + c), xp = load_pack(x + base + c);
    const Pack<float> wp = load_pack(w1 + c);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float g = rounded<T>(static_cast<float>(gp.v[e]) * s) * wp.v[e], xhat = static_cast<float>(xp.v[e]) * r;
      o.v[e] = static_cast<T>(r * (g - xhat * mean_dot));
    }
    store_pack(dx + base + c, o);
  }
}

// Row `row` of the gate: gate + (row / heads)·token_stride + (row % heads)·H (kernels/rms_norm.h, GateRows).
__device__ __forceinline__ int64_t gate_row_offset(int64_t row, int H, GateRows g) {
  return (row / g.heads) * g.token_stride + (row % g.heads) * H;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gated_forward_kernel(const T* __restrict__ x, const T* __restrict__ gate_in, GateRows gate_rows,
                         const T* __restrict__ w, T* __restrict__ out, float* __restrict__ r_out, int64_t rows, int H,
                         float eps) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  const T* __restrict__ gate = gate_in + gate_row_offset(at.row, H, gate_rows);  // this row's, at gate[c]
  const float r = row_rstd(x + base, H, at.lane, eps);
  if (at.lane == 0) r_out[at.row] = r;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> xp = load_pack(x + base + c), gp = load_pack(gate + c), wp = load_pack(w + c);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float normed = rounded<T>(static_cast<float>(xp.v[e]) * r);
      const float y = rounded<T>(static_cast<float>(wp.v[e]) * normed);
      const float g = static_cast<float>(gp.v[e]);
      o.v[e] = static_cast<T>(y * silu(g));
    }
    store_pack(out + base + c, o);
  }
}

// Where the gated backward writes row `row` of grad_x: like x (heads_major false), or in the delta rule's
// heads-major, padded float32 layout [B, heads, padded_tokens, H] from x [B, tokens, heads, H].
struct GradRows {
  bool heads_major;
  int64_t heads, tokens, padded_tokens;
};

__device__ __forceinline__ int64_t grad_row_offset(int64_t row, int H, GradRows g) {
  if (!g.heads_major) return row * H;
  const int64_t head = row % g.heads, token = row / g.heads;
  return ((token / g.tokens * g.heads + head) * g.padded_tokens + token % g.tokens) * H;
}

// Through the same roundings autograd takes over the ATen formulation: grad_y = cast(dout·silu(g)), grad_normed =
// cast(grad_y·w), dx = r·(grad_normed − x̂·mean(grad_normed·x̂)); grad_gate = cast(dout·y·silu'(g)). dx is rounded
// to T, then stored as DX (float32 for the heads-major layout: the conversion's backward, exact).
template <typename T, typename DX>
__global__ void __launch_bounds__(kThreads)
    gated_backward_kernel(const T* __restrict__ dout, const T* __restrict__ x, const T* __restrict__ gate_in,
                          GateRows gate_rows, const T* __restrict__ w, const float* __restrict__ r_in,
                          DX* __restrict__ dx_out, GradRows grad_rows, T* __restrict__ dgate, int64_t rows, int H) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  DX* __restrict__ dx = dx_out + grad_row_offset(at.row, H, grad_rows);  // this row's, at dx[c]
  const T* __restrict__ gate = gate_in + gate_row_offset(at.row, H, gate_rows);  // this row's, at gate[c]
  const float r = r_in[at.row];
  float dot = 0.0f;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> op = load_pack(dout + base + c), xp = load_pack(x + base + c), gp = load_pack(gate + c);
    const Pack<T> wp = load_pack(w + c);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float g = static_cast<float>(gp.v[e]);
      const float grad_y = rounded<T>(static_cast<float>(op.v[e]) * silu(g));
      const float grad_normed = rounded<T>(grad_y * static_cast<float>(wp.v[e]));
      dot += grad_normed * (static_cast<float>(xp.v[e]) * r);
    }
  }
  const float mean_dot = warp_sum(dot) * (1.0f / static_cast<float>(H));
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> op = load_pack(dout + base + c), xp = load_pack(x + base + c), gp = load_pack(gate + c);
    const Pack<T> wp = load_pack(w + c);
    Pack<DX> ox;
    Pack<T> og;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float d = static_cast<float>(op.v[e]), g = static_cast<float>(gp.v[e]), wv = static_cast<float>(wp.v[e]);
      const float xhat = static_cast<float>(xp.v[e]) * r;
      const float y = rounded<T>(wv * rounded<T>(xhat));
      const float grad_normed = rounded<T>(rounded<T>(d * silu(g)) * wv);
      ox.v[e] = static_cast<DX>(rounded<T>(r * (grad_normed - xhat * mean_dot)));
      og.v[e] = static_cast<T>(silu_grad(d * y, g));  // ATen's silu_backward order
    }
    store_pack(dx + c, ox);
    store_pack(dgate + base + c, og);
  }
}

void check_rows(const at::Tensor& t, const at::Tensor& like, const char* what) {
  TORCH_CHECK(t.sizes() == like.sizes() && t.scalar_type() == like.scalar_type() && t.is_contiguous() && pack_aligned(t),
              "rms norm kernel: ", what, " must be a contiguous, aligned tensor shaped and typed like x");
}

void check_weight(const at::Tensor& w, int64_t H, at::ScalarType dtype) {
  TORCH_CHECK(w.dim() == 1 && w.size(0) == H && w.scalar_type() == dtype && w.is_contiguous() && pack_aligned(w),
              "rms norm kernel: the weight must be a contiguous, aligned [", H, "] of the expected dtype");
}

struct Launch {
  int64_t rows;
  int H;
  dim3 blocks;
  cudaStream_t stream;
};

Launch launch_for(const at::Tensor& x) {
  TORCH_CHECK(norm_kernels_accept(x), "rms norm kernel: x must be a contiguous, aligned float32/bfloat16 CUDA tensor "
              "whose last dimension is a multiple of 8");
  const int64_t H = x.size(-1), rows = H == 0 ? 0 : x.numel() / H;
  TORCH_CHECK(H < (int64_t{1} << 31), "rms norm kernel: rows too long");
  return {rows, static_cast<int>(H), dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock)),
          at::cuda::getCurrentCUDAStream()};
}

// The scale must be one value of x's dtype a row: [rows] or x's shape less its last dimension, contiguous.
void check_row_scale(const at::Tensor& scale, const at::Tensor& x, int64_t rows) {
  if (!scale.defined()) return;
  TORCH_CHECK(scale.is_cuda() && scale.scalar_type() == x.scalar_type() && scale.is_contiguous() &&
                  scale.numel() == rows,
              "rms norm kernel: the row scale must be a contiguous tensor of x's dtype with one value a row");
}

template <typename T>
const T* row_scale_ptr(const at::Tensor& scale) {
  return scale.defined() ? scale.data_ptr<T>() : nullptr;
}

void check_gate(const at::Tensor& gate, const at::Tensor& x) {
  TORCH_CHECK(gate.sizes() == x.sizes() && gate.scalar_type() == x.scalar_type() && gate_rows_of(gate),
              "rms norm kernel: the gate must be shaped and typed like x, its rows contiguous and aligned, heads "
              "adjacent within a token and tokens at one stride");
}

}  // namespace

bool norm_kernels_accept(const at::Tensor& x) {
  return x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat) && x.dim() >= 1 &&
         x.is_contiguous() && x.size(-1) % kVec == 0 && pack_aligned(x);
}

std::optional<GateRows> gate_rows_of(const at::Tensor& gate) {
  if (!gate.is_cuda() || gate.dim() < 1 || gate.stride(-1) != 1 || gate.size(-1) % kVec != 0 || !pack_aligned(gate))
    return std::nullopt;
  const int64_t H = gate.size(-1);
  if (gate.is_contiguous()) return GateRows{1, H};
  // [..., tokens, heads, H]: heads adjacent (stride H), tokens at one stride, the leading dimensions collapsing
  // into the token one (a channel slice of a contiguous [B, L, N] viewed as [B, L, heads, H] is)
  if (gate.dim() < 3 || gate.stride(-2) != H) return std::nullopt;
  const int64_t token_stride = gate.stride(-3);
  if (token_stride % kVec != 0 || token_stride < gate.size(-2) * H) return std::nullopt;
  for (int64_t d = gate.dim() - 4; d >= 0; --d)
    if (gate.size(d) != 1 && gate.stride(d) != gate.stride(d + 1) * gate.size(d + 1)) return std::nullopt;
  return GateRows{gate.size(-2), token_stride};
}

std::tuple<at::Tensor, at::Tensor> zero_centred_rms_norm_forward(const at::Tensor& x, const at::Tensor& w1, double eps,
                                                                 const at::Tensor& row_scale) {
  const Launch l = launch_for(x);
  check_weight(w1, l.H, at::kFloat);
  check_row_scale(row_scale, x, l.rows);
  at::Tensor y = at::empty_like(x), r = at::empty({l.rows}, x.options().dtype(at::kFloat));
  if (l.rows == 0) return {y, r};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "zero_centred_rms_norm_forward", [&] {
    zero_centred_forward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        x.data_ptr<scalar_t>(), w1.data_ptr<float>(), row_scale_ptr<scalar_t>(row_scale), y.data_ptr<scalar_t>(),
        r.data_ptr<float>(), l.rows, l.H, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, r};
}

at::Tensor zero_centred_rms_norm_backward(const at::Tensor& grad_y_in, const at::Tensor& x, const at::Tensor& w1,
                                          const at::Tensor& r, const at::Tensor& row_scale) {
  const Launch l = launch_for(x);
  check_weight(w1, l.H, at::kFloat);
  check_row_scale(row_scale, x, l.rows);
  const at::Tensor grad_y = packed_gradient(grad_y_in, x);
  check_rows(grad_y, x, "the output gradient");
  at::Tensor dx = at::empty_like(x);
  if (l.rows == 0) return dx;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "zero_centred_rms_norm_backward", [&] {
    zero_centred_backward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        grad_y.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w1.data_ptr<float>(), row_scale_ptr<scalar_t>(row_scale),
        r.data_ptr<float>(), dx.data_ptr<scalar_t>(), l.rows, l.H);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

std::tuple<at::Tensor, at::Tensor> gated_rms_norm_forward(const at::Tensor& x, const at::Tensor& gate,
                                                          const at::Tensor& w, double eps) {
  const Launch l = launch_for(x);
  check_gate(gate, x);
  check_weight(w, l.H, x.scalar_type());
  at::Tensor out = at::empty_like(x), r = at::empty({l.rows}, x.options().dtype(at::kFloat));
  if (l.rows == 0) return {out, r};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "gated_rms_norm_forward", [&] {
    gated_forward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        x.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), *gate_rows_of(gate), w.data_ptr<scalar_t>(),
        out.data_ptr<scalar_t>(), r.data_ptr<float>(), l.rows, l.H, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, r};
}

namespace {

// dx is x's dtype like x, or float32 [B, heads, padded_tokens, H] (grad_rows.heads_major), allocated by the caller.
void launch_gated_backward(const at::Tensor& grad_out_in, const at::Tensor& x, const at::Tensor& gate,
                           const at::Tensor& w, const at::Tensor& r, const at::Tensor& dx, GradRows grad_rows,
                           const at::Tensor& dgate) {
  const Launch l = launch_for(x);
  check_gate(gate, x);
  check_weight(w, l.H, x.scalar_type());
  const at::Tensor grad_out = packed_gradient(grad_out_in, x);
  check_rows(grad_out, x, "the output gradient");
  if (l.rows == 0) return;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "gated_rms_norm_backward", [&] {
    const auto run = [&](auto* dx_data) {
      gated_backward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
          grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), *gate_rows_of(gate),
          w.data_ptr<scalar_t>(), r.data_ptr<float>(), dx_data, grad_rows, dgate.data_ptr<scalar_t>(), l.rows, l.H);
    };
    if (grad_rows.heads_major) run(dx.data_ptr<float>());
    else run(dx.data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                           const at::Tensor& gate, const at::Tensor& w,
                                                           const at::Tensor& r) {
  at::Tensor dx = at::empty_like(x), dgate = at::empty_like(x);  // contiguous, whatever the gate's layout
  launch_gated_backward(grad_out, x, gate, w, r, dx, GradRows{false, 1, 1, 1}, dgate);
  return {dx, dgate};
}

std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward_heads_major(const at::Tensor& grad_out, const at::Tensor& x,
                                                                       const at::Tensor& gate, const at::Tensor& w,
                                                                       const at::Tensor& r, int64_t padded_tokens) {
  TORCH_CHECK(x.dim() == 4 && padded_tokens >= x.size(1), "gated rms norm backward: x must be [B, L, heads, H] and the "
              "padded token count at least L");
  const int64_t B = x.size(0), L = x.size(1), heads = x.size(2), H = x.size(3);
  at::Tensor dx = at::empty({B, heads, padded_tokens, H}, x.options().dtype(at::kFloat));
  if (padded_tokens > L) dx.narrow(2, L, padded_tokens - L).zero_();  // the padding's gradient (the narrow's zeros)
  at::Tensor dgate = at::empty_like(x);
  launch_gated_backward(grad_out, x, gate, w, r, dx, GradRows{true, heads, L, padded_tokens}, dgate);
  return {dx, dgate};
}

}  // namespace rlloop::cuda
