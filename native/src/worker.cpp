#include "worker.h"

namespace rlloop {

Worker::Worker() : thread_([this] { run(); }) {}

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
    profiler_.before_task(task.operation);
    task.run();  // tasks catch their own exceptions (see js_async.cpp)
    profiler_.after_task();
  }
  profiler_.close();
}

}  // namespace rlloop
