// One dedicated thread per model running its tasks in submission order (heavy libtorch work stays off the JS thread
// and off libuv's pool, whose four threads the rest of Node shares).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "profiler.h"

namespace rlloop {

class Worker {
 public:
  Worker();
  // Lets the running task finish, drops the tasks that have not started (destroying them on the calling thread),
  // and joins.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // `operation` names the task for the opt-in profiler (profiler.h).
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
  TaskProfiler profiler_;
  std::thread thread_;

  void run();
};

}  // namespace rlloop
