// Opt-in GPU/CPU traces of windows of worker tasks through libtorch's Kineto profiler, for finding where the time
// goes (bench/gpu/profile_report.py reads them). Off unless RLLOOP_PROFILE_TRACE names the output file;
// RLLOOP_PROFILE_WINDOWS lists the windows (diagnostics/switches.h). Window i is written to the trace path with "-i"
// before its extension.
// A window spanning a CUDA backward crashes the process (Kineto with libtorch's autograd device threads).
#pragma once
#include <ATen/record_function.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "diagnostics/switches.h"

namespace rlloop {

class TaskProfiler {
 public:
  TaskProfiler();  // reads the environment
  TaskProfiler(const TaskProfiler&) = delete;
  TaskProfiler& operator=(const TaskProfiler&) = delete;
  // All three on the worker thread (Kineto's state belongs to the thread that enabled it).
  void before_task(const std::string& operation);
  void after_task();
  void close();  // writes a window still open (the model was closed inside it)

 private:
  std::string trace_path_;
  std::vector<ProfileWindow> windows_;
  std::map<std::string, int64_t> seen_;  // tasks seen per operation
  int64_t active_ = -1;                  // index of the window being traced
  int64_t remaining_ = 0;                // tasks left in it
  bool prepared_ = false;                // Kineto's prepareProfiler, done at the first window

  std::string path_of(size_t window) const;
  void finish();
};

// A named range in the trace (a "user annotation"), free when no profiler is listening.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name) : guard_(at::RecordScope::USER_SCOPE) {
    if (guard_.isActive()) guard_.before(name);
  }

 private:
  at::RecordFunction guard_;
};

}  // namespace rlloop
