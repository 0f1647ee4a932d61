// One dedicated thread per model running its tasks in submission order (heavy libtorch work stays off the JS thread
// and off libuv's pool, whose four threads the rest of Node shares).
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace rlloop {

class Worker {
 public:
  Worker();
  // Lets the running task finish, drops the tasks that have not started (destroying them on the calling thread),
  // and joins.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(std::function<void()> task);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;

  void run();
};

}  // namespace rlloop
