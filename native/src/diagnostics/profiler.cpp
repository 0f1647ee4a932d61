#include "diagnostics/profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <set>

namespace rlloop {
namespace {
namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

ProfilerConfig kineto_config() { return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true); }

std::set<ActivityType> activities() {
  std::set<ActivityType> out{ActivityType::CPU};
#ifdef RLLOOP_CUDA
  out.insert(ActivityType::CUDA);
#endif
  return out;
}
}  // namespace

TaskProfiler::TaskProfiler() {
  trace_path_ = profile_trace_path();
  if (trace_path_.empty()) return;
  windows_ = profile_windows();
}

std::string TaskProfiler::path_of(size_t window) const {
  const size_t dot = trace_path_.rfind('.');
  const std::string suffix = "-" + std::to_string(window + 1);
  return dot == std::string::npos ? trace_path_ + suffix : trace_path_.substr(0, dot) + suffix + trace_path_.substr(dot);
}

void TaskProfiler::before_task(const std::string& operation) {
  if (windows_.empty()) return;
  const int64_t n = ++seen_[operation];
  if (active_ >= 0) return;
  for (size_t i = 0; i < windows_.size(); ++i) {
    if (windows_[i].operation != operation || windows_[i].occurrence != n) continue;
    // Kineto is prepared only when a window opens: a run whose windows never came (shorter than they assume),
    // prepared at the start, ended with a corrupted heap at exit (H200, torch 2.11).
    if (!prepared_) prof::prepareProfiler(kineto_config(), activities());
    prepared_ = true;
    prof::enableProfiler(kineto_config(), activities());
    active_ = static_cast<int64_t>(i);
    remaining_ = windows_[i].count;
    return;
  }
}

void TaskProfiler::close() {
  if (active_ >= 0) finish();
}

void TaskProfiler::after_task() {
  if (active_ >= 0 && --remaining_ == 0) finish();
}

void TaskProfiler::finish() {
  const std::string path = path_of(static_cast<size_t>(active_));
  active_ = -1;
  prof::disableProfiler()->save(path);
  std::fprintf(stderr, "rlloop: profile written to %s\n", path.c_str());
}

}  // namespace rlloop
