#include "model/gdn_ops.h"

#include <torch/csrc/autograd/custom_function.h>

#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "kernels/gdn.h"
#endif

namespace rlloop {
namespace {

at::Tensor causal_conv_silu_aten(const at::Tensor& x, const at::Tensor& weight) {
  const int64_t L = x.size(1), C = x.size(2), K = weight.size(2);
  // pad K-1 on both sides and keep the first L outputs = left padding only
  at::Tensor conv = at::conv1d(x.transpose(1, 2), weight, /*bias=*/{}, /*stride=*/1, /*padding=*/K - 1,
                               /*dilation=*/1, /*groups=*/C);
  return at::silu(conv.narrow(2, 0, L)).transpose(1, 2);
}

at::Tensor unit_lower_solve_aten(const at::Tensor& A, const at::Tensor& R) {
  return at::linalg_solve_triangular(A, R, /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
}

#ifdef RLLOOP_CUDA
// The solve kernel takes float32 64x64 systems (the chunk size) with matching batch dimensions.
bool solve_kernel_applies(const at::Tensor& A, const at::Tensor& R) {
  return A.is_cuda() && cuda_kernel_enabled("solve") && A.size(-1) == 64 && A.scalar_type() == at::kFloat &&
         R.scalar_type() == at::kFloat && A.sizes().slice(0, A.dim() - 2) == R.sizes().slice(0, R.dim() - 2);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CausalConvSilu : public torch::autograd::Function<CausalConvSilu> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->save_for_backward({x, w});  // x as given: the GDN's is a view of its input projection's output
    return cuda::causal_conv_silu_forward(x, w);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.conv");
    variable_list saved = ctx->get_saved_variables();
    return {cuda::causal_conv_silu_backward(grads[0], saved[0], saved[1]), at::Tensor()};
  }
};

struct UnitLowerSolve : public torch::autograd::Function<UnitLowerSolve> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& A, const at::Tensor& R) {
    at::Tensor X = cuda::unit_lower_solve(A, R, /*transpose=*/false);
    ctx->save_for_backward({A, X});
    return X;
  }
  // X = M^-1 R with M = I + SL(A): dR = M^-T dX, dM = -dR X^T, of which A feeds only the strictly lower part.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    at::Tensor grad_R = cuda::unit_lower_solve(saved[0], grads[0].contiguous(), /*transpose=*/true);
    at::Tensor grad_A = ctx->needs_input_grad(0) ? at::matmul(grad_R, saved[1].transpose(-1, -2)).tril(-1).neg_()
                                                 : at::Tensor();
    return {grad_A, grad_R};
  }
};
#endif

}  // namespace

at::Tensor causal_conv_silu(const at::Tensor& x, const at::Tensor& weight) {
#ifdef RLLOOP_CUDA
  if (x.is_cuda() && cuda_kernel_enabled("conv") && !weight.requires_grad() && weight.size(2) <= cuda::kCausalConvMaxTaps &&
      (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat)) {
    // read in place where the kernels can (a slice of the input projection's output), else from a contiguous copy
    const at::Tensor xs = cuda::causal_conv_accepts(x) ? x : x.contiguous();
    if (cuda::causal_conv_accepts(xs)) {
      at::Tensor w = weight.reshape({weight.size(0), weight.size(2)}).to(x.scalar_type()).contiguous();
      return CausalConvSilu::apply(xs, w);
    }
  }
#endif
  return causal_conv_silu_aten(x, weight);
}

at::Tensor unit_lower_solve_raw(const at::Tensor& A, const at::Tensor& R, bool transpose) {
#ifdef RLLOOP_CUDA
  if (solve_kernel_applies(A, R)) {
    return cuda::unit_lower_solve(A.contiguous(), R.contiguous(), transpose);
  }
#endif
  if (!transpose) return unit_lower_solve_aten(A, R);
  // (I + SL(A))^T is unit upper triangular with A's strictly lower part transposed
  return at::linalg_solve_triangular(A.transpose(-1, -2), R, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
}

at::Tensor unit_lower_solve(const at::Tensor& A, const at::Tensor& R) {
#ifdef RLLOOP_CUDA
  if (solve_kernel_applies(A, R)) {
    return UnitLowerSolve::apply(A.contiguous(), R.contiguous());
  }
#endif
  return unit_lower_solve_aten(A, R);
}

}  // namespace rlloop
