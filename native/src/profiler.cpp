#include "profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

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
  const char* path = std::getenv("RLLOOP_PROFILE_TRACE");
  if (!path || !*path) return;
  trace_path_ = path;
  const char* spec = std::getenv("RLLOOP_PROFILE_WINDOWS");
  std::stringstream list(spec && *spec ? spec : "logprobs#2:1");
  for (std::string item; std::getline(list, item, ',');) {
    const size_t hash = item.find('#'), colon = item.find(':', hash == std::string::npos ? 0 : hash);
    Window w;
    if (hash == std::string::npos || colon == std::string::npos) {
      std::fprintf(stderr, "rlloop: RLLOOP_PROFILE_WINDOWS item \"%s\" is not operation#k:count; ignored\n", item.c_str());
      continue;
    }
    w.operation = item.substr(0, hash);
    w.occurrence = std::atoll(item.substr(hash + 1, colon - hash - 1).c_str());
    w.count = std::atoll(item.substr(colon + 1).c_str());
    if (w.occurrence > 0 && w.count > 0) windows_.push_back(w);
  }
  prof::prepareProfiler(kineto_config(), activities());
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
