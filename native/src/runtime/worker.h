// One dedicated thread per model running its tasks in submission order (heavy libtorch work stays off the JS thread
// and off libuv's pool, whose four threads the rest of Node shares).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "diagnostics/profiler.h"

namespace rlloop {

class Worker {
 public:
  // `profiled`: whether RLLOOP_PROFILE_* windows count this worker's tasks (only the model's compute worker is; the
  // Kineto profiler is one per process).
  explicit Worker(bool profiled = true);
  // Lets the running task finish, drops the tasks that have not started (destroying them on the calling thread),
  // and joins.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // `operation` names the task for the opt-in profiler (diagnostics/profiler.h).
  void post(std::function<void()> task, std::string operation = {});

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  struct Task {
    std::function<void()> run;
    std::string operation;
  };
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::unique_ptr<TaskProfiler> profiler_;  // null when not profiled
  std::thread thread_;

  void run();
};

}  // namespace rlloop
