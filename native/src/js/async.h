// Promises for work done on a model's worker thread. run() posts the work; the worker's result (or exception) is
// handed back to the JS thread through a Napi::ThreadSafeFunction, where the promise is resolved with the value the
// work's JsResult builds, or rejected with a JS Error whose message says which operation failed and why, and whose
// `code` is the rlloop::ErrorCode name (ERR_RLLOOP_TORCH for libtorch's own errors).
#pragma once
#include <napi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "runtime/worker.h"

namespace rlloop {

using JsResult = std::function<Napi::Value(Napi::Env)>;  // runs on the JS thread

class AsyncRunner {
 public:
  // `profiled`: see Worker.
  explicit AsyncRunner(Napi::Env env, bool profiled = true);
  ~AsyncRunner();  // lets the running task finish, joins the worker, releases the thread-safe function
  AsyncRunner(const AsyncRunner&) = delete;
  AsyncRunner& operator=(const AsyncRunner&) = delete;

  // `owner` is kept alive until the promise settles; `on_failure` (optional) runs on the JS thread before a rejection.
  Napi::Promise run(Napi::Env env, const std::string& operation, Napi::Object owner, std::function<JsResult()> work,
                    std::function<void()> on_failure = nullptr);

  // Ordered fire-and-forget work for synchronous JS methods that validated their input already; if it throws
  // anyway, the next run() on this worker rejects with that error.
  void post(const std::string& operation, std::function<void()> work);

  struct Completion;
  static void deliver(Napi::Env env, Napi::Function, AsyncRunner* runner, Completion* completion);

 private:
  using Tsfn = Napi::TypedThreadSafeFunction<AsyncRunner, Completion, &AsyncRunner::deliver>;
  std::unique_ptr<Worker> worker_;
  // False once Node has finalized tsfn_. At environment teardown Node closes thread-safe functions and runs object
  // finalizers in an order of its own: an ObjectWrap finalized after its runner's tsfn_ is gone must not Release it
  // (that locks a destroyed mutex and aborts the process). Shared with the finalizer, which may outlive this object.
  std::shared_ptr<std::atomic<bool>> tsfn_alive_ = std::make_shared<std::atomic<bool>>(true);
  Tsfn tsfn_;
  int pending_ = 0;             // JS thread only
  std::string deferred_error_;  // worker thread only
};

// What an exception says, for JS: message and code.
void describe_exception(std::exception_ptr error, std::string& message, std::string& code);

}  // namespace rlloop
