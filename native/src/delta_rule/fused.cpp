#include "delta_rule/fused.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "base/check.h"
#include "block/exec_cpu.h"
#include "delta_rule/sequences.h"
#include "diagnostics/backward_timeline.h"
#include "diagnostics/switches.h"
#ifdef RLLOOP_CUDA
#include "delta_rule/fused_cuda.h"
#endif

namespace rlloop {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CpuRun {
  template <class Program>
  void operator()(const Program& program, int64_t blocks) const {
    block::run_on_cpu(program, blocks);
  }
};

// The head sizes the CPU build runs: the tests' tiny models and the real one.
#define RLLOOP_CPU_HEAD_SIZES 16, 32, 64, 128

// Contiguous, with data at a 16-byte boundary (the kernels move float4s; the tensor cores' 32-byte tile loads only
// ever read tensors the kernels allocate themselves); a view at another offset is copied.
at::Tensor dense(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

// TF32 products where libtorch's float32 matrix products use TF32 (on for bfloat16 models, model/qwen35_model.cpp); the
// forward's choice is kept for its backward, which recomputes the forward's terms and must do so identically.
bool tf32_products(const at::Tensor& q) { return q.is_cuda() && at::globalContext().allowTF32CuBLAS(); }

at::Tensor run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                       const at::Tensor& g, delta_rule::ForwardSaved* saved, bool tf32) {
#ifdef RLLOOP_CUDA
  if (q.is_cuda()) return cuda::delta_rule_forward(q, k, v, beta, g, saved, tf32);
#endif
  return delta_rule::forward<RLLOOP_CPU_HEAD_SIZES>(CpuRun{}, q, k, v, beta, g, saved);
}

std::array<at::Tensor, 5> run_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const at::Tensor& beta, const at::Tensor& g,
                                       const delta_rule::ForwardSaved& saved, const at::Tensor& dO, bool tf32) {
#ifdef RLLOOP_CUDA
  if (q.is_cuda()) return cuda::delta_rule_backward(q, k, v, beta, g, saved, dO, tf32);
#endif
  return delta_rule::backward<RLLOOP_CPU_HEAD_SIZES>(CpuRun{}, q, k, v, beta, g, saved, dO);
}

struct DeltaRuleKernels : public torch::autograd::Function<DeltaRuleKernels> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& beta, const at::Tensor& g) {
    const bool tf32 = tf32_products(q);
    delta_rule::ForwardSaved saved;
    at::Tensor out = run_forward(q, k, v, beta, g, &saved, tf32);
    ctx->save_for_backward({q, k, v, beta, g, saved.states, saved.U, saved.W, saved.T});
    ctx->saved_data["tf32"] = tf32;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    BackwardNodeTimer timer("gdn.delta_rule");
    const variable_list saved = ctx->get_saved_variables();
    auto r = run_backward(saved[0], saved[1], saved[2], saved[3], saved[4], {saved[5], saved[6], saved[7], saved[8]},
                          dense(grads[0]), ctx->saved_data["tf32"].toBool());
    return {r[0], r[1], r[2], r[3], r[4]};
  }
};

// The contract of delta_rule_kernels, checked before any kernel reads memory sized from q alone.
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& beta,
                  const at::Tensor& g) {
  RLLOOP_CHECK(delta_rule_kernels_support(q, v), Unsupported,
               "delta rule kernels: no kernels for q " << q.sizes() << " " << q.scalar_type() << " on " << q.device());
  const auto chunks = q.sizes().slice(0, 4);
  RLLOOP_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes() && beta.sizes() == chunks && g.sizes() == chunks,
               Shape, "delta rule kernels: q, k, v must be [B, H, N, 64, D] and beta, g [B, H, N, 64]; got q "
                          << q.sizes() << ", k " << k.sizes() << ", v " << v.sizes() << ", beta " << beta.sizes()
                          << ", g " << g.sizes());
  for (const at::Tensor* t : {&k, &v, &beta, &g}) {
    RLLOOP_CHECK(t->scalar_type() == at::kFloat && t->device() == q.device(), Invalid,
                 "delta rule kernels: every input must be float32 on " << q.device());
  }
}

}  // namespace

bool delta_rule_kernels_support(const at::Tensor& q, const at::Tensor& v) {
  if (q.dim() != 5 || v.dim() != 5 || q.size(3) != delta_rule::kChunk || q.scalar_type() != at::kFloat) return false;
  const int64_t D = q.size(4);
  if (v.size(4) != D) return false;
#ifdef RLLOOP_CUDA
  if (q.is_cuda()) return cuda::delta_rule_supports(D, q.device().index());
#endif
  return q.is_cpu() && delta_rule::head_size_in<RLLOOP_CPU_HEAD_SIZES>(D);
}

bool delta_rule_kernels_apply(const at::Tensor& q, const at::Tensor& v) {
  if (!delta_rule_kernels_support(q, v)) return false;
  return q.is_cpu() ? cpu_delta_rule_runs_kernels() : cuda_kernel_enabled("delta_rule");
}

at::Tensor delta_rule_kernels(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                              const at::Tensor& beta_in, const at::Tensor& g_in) {
  const at::Tensor q = dense(q_in), k = dense(k_in), v = dense(v_in), beta = dense(beta_in), g = dense(g_in);
  check_inputs(q, k, v, beta, g);
  const bool graph = at::GradMode::is_enabled() &&
                     (q.requires_grad() || k.requires_grad() || v.requires_grad() || beta.requires_grad() || g.requires_grad());
  if (graph) return DeltaRuleKernels::apply(q, k, v, beta, g);
  return run_forward(q, k, v, beta, g, nullptr, tf32_products(q));
}

}  // namespace rlloop
