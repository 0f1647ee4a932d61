#include "delta_rule/check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/DeviceAccelerator.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/check.h"
#include "delta_rule/aten.h"
#include "delta_rule/fused.h"
#include "runtime/cuda_math.h"

namespace rlloop {
namespace {

constexpr int64_t kChunk = 64;

struct Inputs {
  at::Tensor q, k, v, beta, g, dO;  // [1, H, N, 64, D] and [1, H, N, 64], float64 on the CPU
};

// Random inputs as chunk_gated_delta_rule hands them over: q and k L2-normalised (q scaled by D^-0.5), β in (0, 1),
// g < 0 with decays over a chunk from ~1 to ~e^-20, zeros past the sequence's end.
Inputs random_inputs(const DeltaRuleCheckOptions& o) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  const int64_t N = (o.length + kChunk - 1) / kChunk, Lp = N * kChunk, H = o.sequences, D = o.dim;
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor real = (at::arange(Lp, opts) < o.length).to(at::kDouble);  // 1 up to the length, then 0
  const auto normal = [&](at::IntArrayRef shape) { return at::randn(shape, gen, opts); };
  const auto unit_rows = [](const at::Tensor& x) { return x / x.norm(2, -1, /*keepdim=*/true); };
  Inputs in;
  in.q = unit_rows(normal({1, H, Lp, D})) * (1.0 / std::sqrt(static_cast<double>(D))) * real.view({Lp, 1});
  in.k = unit_rows(normal({1, H, Lp, D})) * real.view({Lp, 1});
  in.v = normal({1, H, Lp, D}) * real.view({Lp, 1});
  in.beta = at::sigmoid(normal({1, H, Lp})) * real;
  in.g = -at::exp(normal({1, H, Lp}) - 2.0) * real;
  in.dO = normal({1, H, Lp, D});
  const auto chunked = [&](at::Tensor& t) {
    t = t.dim() == 4 ? t.reshape({1, H, N, kChunk, D}) : t.reshape({1, H, N, kChunk});
  };
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.beta, &in.g, &in.dO}) chunked(*t);
  return in;
}

using DeltaRule = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           const at::Tensor&)>;

struct Run {
  at::Tensor out;
  std::array<at::Tensor, 5> grads;
};

// q, k, v, β, g as fresh leaves on the device (copies: the float64 CPU inputs stay untouched).
std::array<at::Tensor, 5> leaves(const Inputs& in, const at::Device& device, at::ScalarType dtype) {
  std::array<at::Tensor, 5> x;
  const at::Tensor* sources[5] = {&in.q, &in.k, &in.v, &in.beta, &in.g};
  for (int i = 0; i < 5; ++i) x[i] = sources[i]->to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
  return x;
}

Run forward_backward(const DeltaRule& rule, const Inputs& in, at::ScalarType dtype, const at::Device& device) {
  std::array<at::Tensor, 5> x = leaves(in, device, dtype);
  for (at::Tensor& t : x) t.requires_grad_(true);
  Run r;
  r.out = rule(x[0], x[1], x[2], x[3], x[4]);
  r.out.backward(in.dO.to(device, dtype));
  for (int i = 0; i < 5; ++i) r.grads[i] = x[i].grad();
  r.out = r.out.detach();
  return r;
}

double relative(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor w = want.to(at::kCPU, at::kDouble), g = got.to(at::kCPU, at::kDouble);
  return (g - w).norm().item<double>() / std::max(w.norm().item<double>(), 1e-300);
}

DeltaRuleErrors errors(const Run& run, const Run& reference) {
  DeltaRuleErrors e;
  e.output = relative(run.out, reference.out);
  for (int i = 0; i < 5; ++i) e.grads[i] = relative(run.grads[i], reference.grads[i]);
  return e;
}

void wait_for(const at::Device& device) {
  if (!device.is_cpu()) at::accelerator::synchronizeDevice(device.index());
}

double median_ms(int64_t repeats, const at::Device& device, const std::function<void()>& body) {
  std::vector<double> ms;
  body();  // warm-up: first-use costs (allocations, kernel loads) stay out of the figures
  for (int64_t i = 0; i < repeats; ++i) {
    wait_for(device);
    const auto start = std::chrono::steady_clock::now();
    body();
    wait_for(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

DeltaRuleTiming time_rule(const DeltaRule& rule, const Inputs& in, const at::Device& device, int64_t repeats) {
  const std::array<at::Tensor, 5> x = leaves(in, device, at::kFloat);
  const at::Tensor dO = in.dO.to(device, at::kFloat);
  DeltaRuleTiming t;
  t.forward_ms = median_ms(repeats, device, [&] {
    c10::NoGradGuard no_grad;
    rule(x[0], x[1], x[2], x[3], x[4]);
  });
  t.training_ms = median_ms(repeats, device, [&] {
    std::array<at::Tensor, 5> fresh;
    for (int i = 0; i < 5; ++i) fresh[i] = x[i].detach().requires_grad_(true);
    rule(fresh[0], fresh[1], fresh[2], fresh[3], fresh[4]).backward(dO);
  });
  return t;
}

// Whether sequence `sequence` of t ([1, H, …]) holds finite values only.
bool sequence_finite(const at::Tensor& t, int64_t sequence) {
  return at::isfinite(t.select(1, sequence)).all().item<bool>();
}

// A rounding to TF32 by integer add carries CUDA's canonical NaN (all mantissa bits set, what its arithmetic
// produces) into the sign and the exponent: the operand comes out as a zero and the NaN vanishes from a product,
// so a round's statistics could look finite. torch's quiet NaN (one mantissa bit) would not show that, hence the
// bit pattern. Planted in the last real token of sequence 0 of two. On the CPU executor the products are exact
// float32 (no TF32 rounding): there the check covers the programs' own NaN paths, on CUDA the rounding too.
std::vector<std::string> lost_nans(const DeltaRuleCheckOptions& o) {
  DeltaRuleCheckOptions two = o;
  two.sequences = 2;
  const Inputs in = random_inputs(two);
  const int64_t chunk = (o.length - 1) / kChunk, row = (o.length - 1) % kChunk;
  const char* planted_in[4] = {"q", "k", "v", "the output's gradient"};
  const char* grad_names[5] = {"q", "k", "v", "beta", "g"};
  std::vector<std::string> lost;
  for (int which = 0; which < 4; ++which) {
    for (const uint32_t bits : {0x7fffffffu, 0xffffffffu}) {
      std::array<at::Tensor, 5> x = leaves(in, o.device, at::kFloat);
      at::Tensor dO = in.dO.to(o.device, at::kFloat);
      at::Tensor& target = which < 3 ? x[which] : dO;
      // [1, H, N, 64, D]: sequence 0, the chunk, the row, the first column
      target.view(at::kInt).select(1, 0).select(1, chunk).select(1, row).select(1, 0).fill_(static_cast<int32_t>(bits));
      for (at::Tensor& t : x) t.requires_grad_(true);
      const at::Tensor out = delta_rule_kernels(x[0], x[1], x[2], x[3], x[4]);
      out.backward(dO);
      const std::string what = std::string(bits >> 31 ? "-" : "+") + "NaN in " + planted_in[which] + ": ";
      if (which < 3 && sequence_finite(out, 0)) lost.push_back(what + "the output finite");
      if (!sequence_finite(out, 1)) lost.push_back(what + "the other sequence's output not finite");
      for (int i = 0; i < 5; ++i) {
        const std::string gradient = std::string("gradient of ") + grad_names[i];
        if (which == 3 && sequence_finite(x[i].grad(), 0)) lost.push_back(what + "the " + gradient + " finite");
        if (!sequence_finite(x[i].grad(), 1)) lost.push_back(what + "the other sequence's " + gradient + " not finite");
      }
    }
  }
  return lost;
}

}  // namespace

DeltaRuleCheck check_delta_rule(const DeltaRuleCheckOptions& o) {
  RLLOOP_CHECK(o.sequences > 0 && o.length > 0 && o.dim > 0 && o.repeats >= 0, Invalid,
               "deltaRuleCheck: sequences, length and dim must be positive, repeats not negative");
  c10::AutoGradMode grad(true);
  const Inputs in = random_inputs(o);
  const DeltaRule kernels = delta_rule_kernels, chunks = delta_rule_chunks;
  DeltaRuleCheck result;
  CudaMathClaim::with_tf32(o.tf32, [&] {
    const at::Tensor probe = in.q.to(o.device, at::kFloat), probe_v = in.v.to(o.device, at::kFloat);
    RLLOOP_CHECK(delta_rule_kernels_support(probe, probe_v), Unsupported,
                 "deltaRuleCheck: the kernels do not take dim " << o.dim << " on " << o.device
                                                                   << " (head sizes: 16, 32, 64, 128 on the CPU, 128 on CUDA)");
    result.kernels_apply = delta_rule_kernels_apply(probe, probe_v);
    const Run reference = forward_backward(chunks, in, at::kDouble, o.device);
    result.chunks = errors(forward_backward(chunks, in, at::kFloat, o.device), reference);
    result.kernels = errors(forward_backward(kernels, in, at::kFloat, o.device), reference);
    result.nan_lost = lost_nans(o);
    if (o.repeats > 0) {
      result.chunks_time = time_rule(chunks, in, o.device, o.repeats);
      result.kernels_time = time_rule(kernels, in, o.device, o.repeats);
    }
  });
  return result;
}

}  // namespace rlloop
