// A diagnostic of the delta rule's two implementations: the fused kernels (delta_rule/fused.h) and the ATen
// formulation (delta_rule/aten.h), each against a float64 run of the ATen formulation on the same random inputs
// (shaped and scaled as chunk_gated_delta_rule prepares them, padded to whole chunks), forward and every input's
// gradient; whether a NaN in an input reaches the kernels' results; and, with repeats, both timed (median
// milliseconds). Behind test/native-delta-rule-kernels.test.ts and bench/gpu/delta_rule_check.mjs (the GPU
// comparison at the 9B shapes, without the model).
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rlloop {

struct DeltaRuleCheckOptions {
  int64_t sequences = 2;  // B·H
  int64_t length = 150;   // tokens a sequence, padded up to whole chunks of 64
  int64_t dim = 16;       // dk = dv
  uint64_t seed = 0;
  at::Device device = at::kCPU;
  bool tf32 = false;      // TF32 products on CUDA for the run (both implementations), restored after
  int64_t repeats = 0;    // timed runs of each implementation after the checks (0: none)
};

struct DeltaRuleErrors {
  double output = 0;                 // ‖o − o_ref‖ / ‖o_ref‖
  std::array<double, 5> grads = {};  // the same for q, k, v, β, g
};

struct DeltaRuleTiming {
  double forward_ms = 0;   // no graph (a frozen pass)
  double training_ms = 0;  // forward with the graph + backward
};

struct DeltaRuleCheck {
  DeltaRuleErrors kernels, chunks;
  DeltaRuleTiming kernels_time, chunks_time;
  bool kernels_apply = false;  // whether the model would use the kernels for these inputs (delta_rule_kernels_apply)
  // The NaNs the kernels lost: one element of q, k, v or the output's gradient set to CUDA's canonical NaN (either
  // sign) in one of two sequences must make that sequence's output (the gradient's: every input's gradient)
  // non-finite and leave the other sequence's finite. Empty when every NaN arrived, else what went missing.
  std::vector<std::string> nan_lost;
};

DeltaRuleCheck check_delta_rule(const DeltaRuleCheckOptions& options);

}  // namespace rlloop
