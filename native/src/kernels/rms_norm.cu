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

template <typename T>
__global__ void __launch_bounds__(kThreads)
    zero_centred_forward_kernel(const T* __restrict__ x, const float* __restrict__ w1, T* __restrict__ y,
                                float* __restrict__ r_out, int64_t rows, int H, float eps) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const T* xr = x + at.row * H;
  T* yr = y + at.row * H;
  const float r = row_rstd(xr, H, at.lane, eps);
  if (at.lane == 0) r_out[at.row] = r;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> xp = load_pack(xr + c);
    const Pack<float> wp = load_pack(w1 + c);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) o.v[e] = static_cast<T>(static_cast<float>(xp.v[e]) * r * wp.v[e]);
    store_pack(yr + c, o);
  }
}

// g = dy·w1, x̂ = x·r: dx = r·(g − x̂·mean(g·x̂)).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    zero_centred_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ w1,
                                 const float* __restrict__ r_in, T* __restrict__ dx, int64_t rows, int H) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  const float r = r_in[at.row];
  float dot = 0.0f;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> gp = load_pack(dy + base + c), xp = load_pack(x + base + c);
    const Pack<float> wp = load_pack(w1 + c);
#pragma unroll
    for (int e = 0; e < kVec; ++e) dot += static_cast<float>(gp.v[e]) * wp.v[e] * (static_cast<float>(xp.v[e]) * r);
  }
  const float mean_dot = warp_sum(dot) * (1.0f / static_cast<float>(H));
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> gp = load_pack(dy + base + c), xp = load_pack(x + base + c);
    const Pack<float> wp = load_pack(w1 + c);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float g = static_cast<float>(gp.v[e]) * wp.v[e], xhat = static_cast<float>(xp.v[e]) * r;
      o.v[e] = static_cast<T>(r * (g - xhat * mean_dot));
    }
    store_pack(dx + base + c, o);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gated_forward_kernel(const T* __restrict__ x, const T* __restrict__ gate, const T* __restrict__ w,
                         T* __restrict__ out, float* __restrict__ r_out, int64_t rows, int H, float eps) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  const float r = row_rstd(x + base, H, at.lane, eps);
  if (at.lane == 0) r_out[at.row] = r;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> xp = load_pack(x + base + c), gp = load_pack(gate + base + c), wp = load_pack(w + c);
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

// Through the same roundings autograd takes over the ATen formulation: grad_y = cast(dout·silu(g)), grad_normed =
// cast(grad_y·w), dx = r·(grad_normed − x̂·mean(grad_normed·x̂)); grad_gate = cast(dout·y·silu'(g)).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gated_backward_kernel(const T* __restrict__ dout, const T* __restrict__ x, const T* __restrict__ gate,
                          const T* __restrict__ w, const float* __restrict__ r_in, T* __restrict__ dx,
                          T* __restrict__ dgate, int64_t rows, int H) {
  const RowIndex at = row_index();
  if (at.row >= rows) return;
  const int64_t base = at.row * H;
  const float r = r_in[at.row];
  float dot = 0.0f;
  for (int c = at.lane * kVec; c < H; c += kStride) {
    const Pack<T> op = load_pack(dout + base + c), xp = load_pack(x + base + c), gp = load_pack(gate + base + c);
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
    const Pack<T> op = load_pack(dout + base + c), xp = load_pack(x + base + c), gp = load_pack(gate + base + c);
    const Pack<T> wp = load_pack(w + c);
    Pack<T> ox, og;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float d = static_cast<float>(op.v[e]), g = static_cast<float>(gp.v[e]), wv = static_cast<float>(wp.v[e]);
      const float xhat = static_cast<float>(xp.v[e]) * r;
      const float y = rounded<T>(wv * rounded<T>(xhat));
      const float grad_normed = rounded<T>(rounded<T>(d * silu(g)) * wv);
      ox.v[e] = static_cast<T>(r * (grad_normed - xhat * mean_dot));
      og.v[e] = static_cast<T>(silu_grad(d * y, g));  // ATen's silu_backward order
    }
    store_pack(dx + base + c, ox);
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

}  // namespace

bool norm_kernels_accept(const at::Tensor& x) {
  return x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat) && x.dim() >= 1 &&
         x.is_contiguous() && x.size(-1) % kVec == 0 && pack_aligned(x);
}

std::tuple<at::Tensor, at::Tensor> zero_centred_rms_norm_forward(const at::Tensor& x, const at::Tensor& w1, double eps) {
  const Launch l = launch_for(x);
  check_weight(w1, l.H, at::kFloat);
  at::Tensor y = at::empty_like(x), r = at::empty({l.rows}, x.options().dtype(at::kFloat));
  if (l.rows == 0) return {y, r};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "zero_centred_rms_norm_forward", [&] {
    zero_centred_forward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        x.data_ptr<scalar_t>(), w1.data_ptr<float>(), y.data_ptr<scalar_t>(), r.data_ptr<float>(), l.rows, l.H,
        static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, r};
}

at::Tensor zero_centred_rms_norm_backward(const at::Tensor& grad_y_in, const at::Tensor& x, const at::Tensor& w1,
                                          const at::Tensor& r) {
  const Launch l = launch_for(x);
  check_weight(w1, l.H, at::kFloat);
  const at::Tensor grad_y = packed_gradient(grad_y_in, x);
  check_rows(grad_y, x, "the output gradient");
  at::Tensor dx = at::empty_like(x);
  if (l.rows == 0) return dx;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "zero_centred_rms_norm_backward", [&] {
    zero_centred_backward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        grad_y.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w1.data_ptr<float>(), r.data_ptr<float>(),
        dx.data_ptr<scalar_t>(), l.rows, l.H);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

std::tuple<at::Tensor, at::Tensor> gated_rms_norm_forward(const at::Tensor& x, const at::Tensor& gate,
                                                          const at::Tensor& w, double eps) {
  const Launch l = launch_for(x);
  check_rows(gate, x, "the gate");
  check_weight(w, l.H, x.scalar_type());
  at::Tensor out = at::empty_like(x), r = at::empty({l.rows}, x.options().dtype(at::kFloat));
  if (l.rows == 0) return {out, r};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "gated_rms_norm_forward", [&] {
    gated_forward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        x.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
        r.data_ptr<float>(), l.rows, l.H, static_cast<float>(eps));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out, r};
}

std::tuple<at::Tensor, at::Tensor> gated_rms_norm_backward(const at::Tensor& grad_out_in, const at::Tensor& x,
                                                           const at::Tensor& gate, const at::Tensor& w,
                                                           const at::Tensor& r) {
  const Launch l = launch_for(x);
  check_rows(gate, x, "the gate");
  check_weight(w, l.H, x.scalar_type());
  const at::Tensor grad_out = packed_gradient(grad_out_in, x);
  check_rows(grad_out, x, "the output gradient");
  at::Tensor dx = at::empty_like(x), dgate = at::empty_like(gate);
  if (l.rows == 0) return {dx, dgate};
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "gated_rms_norm_backward", [&] {
    gated_backward_kernel<scalar_t><<<l.blocks, kThreads, 0, l.stream>>>(
        grad_out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
        r.data_ptr<float>(), dx.data_ptr<scalar_t>(), dgate.data_ptr<scalar_t>(), l.rows, l.H);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {dx, dgate};
}

}  // namespace rlloop::cuda
