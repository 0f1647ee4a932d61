// The native module's environment switches, all of them, in this one place. They are diagnostics only: which of two
// implementations runs (to compare them, or to bisect a numerical difference on the GPU) and what gets traced.
// Behaviour a caller chooses (dtype, checkpointing, TF32, the attention backend, ...) comes as typed load options
// (runtime/session.h LoadOptions), never from the environment.
//
//   RLLOOP_KERNELS            0 | 1 | -name,...   which of the project's CUDA kernels run; "0": none (the ATen
//                                                 formulations the CPU conformance suite checks run on the GPU too),
//                                                 "-qkv_heads,-norm": all but those. Names: conv and solve
//                                                 (kernels/gdn.cu), norm (kernels/rms_norm.cu), qkv_heads
//                                                 (kernels/qkv_heads.cu), swiglu (kernels/swiglu.cu), delta_rule
//                                                 (delta_rule/fused_cuda.cu; off, delta_rule/aten.cpp runs),
//                                                 vision_rope (kernels/vision_rope.cu)
//   RLLOOP_DELTA_RULE_CPU     chunks | kernels    on the CPU, the delta rule's ATen formulation or the fused kernels'
//                                                 block programs run by the CPU executor
//   RLLOOP_GDN_BACKWARD       manual | autograd   the ATen delta rule's backward: hand-derived, or autograd's replay
//   RLLOOP_PROFILE_TRACE      FILE.json           Kineto traces of windows of worker tasks (diagnostics/profiler.h)
//   RLLOOP_PROFILE_WINDOWS    op#k:count,...      those windows (default logprobs#2:1)
//   RLLOOP_BACKWARD_TIMELINE  FILE.jsonl          a backward's time by model segment (diagnostics/backward_timeline.h)
//
// Each is read once per process, at its first use; the first of a choice's values is its default (unset or empty);
// a value that is not one of the choices is an Invalid error naming the variable and its choices, so a typo cannot
// silently select the default.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlloop {

// Built with RLLOOP_CUDA and not turned off by RLLOOP_KERNELS (always false in a CPU build).
bool cuda_kernel_enabled(std::string_view name);
bool cpu_delta_rule_runs_kernels();
bool delta_rule_backward_is_manual();

struct ProfileWindow {
  std::string operation;   // a worker task's name: "logprobs", "backward", "optimizer.step", ...
  int64_t occurrence = 1;  // start before this (1-based) task of that operation
  int64_t count = 1;       // and trace this many tasks of any kind from there
};
const std::string& profile_trace_path();  // empty: no profiling
const std::vector<ProfileWindow>& profile_windows();  // read only when profiling
const std::string& backward_timeline_path();  // empty: no timeline

}  // namespace rlloop
