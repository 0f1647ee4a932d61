#include "runtime/worker.h"

namespace rlloop {

Worker::Worker(bool profiled)
    : profiler_(profiled ? std::make_unique<TaskProfiler>() : nullptr), thread_([this] { run(); }) {}

Worker::~Worker() {
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  dropped.swap(queue_);
}

void Worker::post(std::function<void()> task, std::string operation) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(task), std::move(operation)});
  }
  wake_.notify_one();
}

void Worker::run() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (profiler_) profiler_->before_task(task.operation);
    task.run();  // tasks catch their own exceptions (see js/async.cpp)
    if (profiler_) profiler_->after_task();
  }
  if (profiler_) profiler_->close();
}

}  // namespace rlloop
