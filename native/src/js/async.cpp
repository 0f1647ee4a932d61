#include "js/async.h"

#include <c10/util/Exception.h>

#include "base/check.h"

namespace rlloop {

struct AsyncRunner::Completion {
  Completion(Napi::Env env, Napi::Object owner_object) : deferred(Napi::Promise::Deferred::New(env)) {
    owner = Napi::Persistent(owner_object);
  }
  Napi::Promise::Deferred deferred;
  Napi::ObjectReference owner;
  std::string operation;
  JsResult result;
  std::function<void()> on_failure;
  std::string error, code;
};

void describe_exception(std::exception_ptr error, std::string& message, std::string& code) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    message = e.detail();
    code = error_code_name(e.code());
  } catch (const c10::OutOfMemoryError& e) {
    message = std::string("out of memory: ") + e.what_without_backtrace();
    code = "ERR_RLLOOP_OOM";
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
    code = "ERR_RLLOOP_TORCH";
  } catch (const std::bad_alloc&) {
    message = "out of host memory";
    code = "ERR_RLLOOP_OOM";
  } catch (const std::exception& e) {
    message = e.what();
    code = "ERR_RLLOOP_INTERNAL";
  } catch (...) {
    message = "unknown C++ exception";
    code = "ERR_RLLOOP_INTERNAL";
  }
}

namespace {
using AliveFlag = std::shared_ptr<std::atomic<bool>>;
void mark_finalized(Napi::Env, AliveFlag* alive, AsyncRunner*) {
  **alive = false;
  delete alive;
}
}  // namespace

AsyncRunner::AsyncRunner(Napi::Env env, bool profiled)
    : worker_(std::make_unique<Worker>(profiled)),
      tsfn_(Tsfn::New(env, "rlloop-native", 0, 1, this, mark_finalized, new AliveFlag(tsfn_alive_))) {
  tsfn_.Unref(env);  // an idle model must not keep the process alive; run() refs while work is pending
}

AsyncRunner::~AsyncRunner() {
  worker_.reset();  // join first: a running task may still call into tsfn_
  if (*tsfn_alive_) tsfn_.Release();
}

void AsyncRunner::deliver(Napi::Env env, Napi::Function, AsyncRunner* runner, Completion* raw) {
  std::unique_ptr<Completion> c(raw);
  if (env == nullptr) return;  // the environment is shutting down
  if (--runner->pending_ == 0) runner->tsfn_.Unref(env);
  Napi::HandleScope scope(env);
  if (c->error.empty()) {
    try {
      c->deferred.Resolve(c->result(env));
      return;
    } catch (const Napi::Error& e) {
      c->deferred.Reject(e.Value());
      return;
    } catch (...) {
      describe_exception(std::current_exception(), c->error, c->code);
    }
  }
  if (c->on_failure) c->on_failure();
  Napi::Error error = Napi::Error::New(env, c->operation + ": " + c->error);
  error.Set("code", Napi::String::New(env, c->code));
  c->deferred.Reject(error.Value());
}

Napi::Promise AsyncRunner::run(Napi::Env env, const std::string& operation, Napi::Object owner,
                               std::function<JsResult()> work, std::function<void()> on_failure) {
  auto completion = std::make_unique<Completion>(env, owner);
  completion->operation = operation;
  completion->on_failure = std::move(on_failure);
  Napi::Promise promise = completion->deferred.Promise();
  if (pending_++ == 0) tsfn_.Ref(env);
  Completion* c = completion.release();  // owned by the task until handed to the thread-safe function
  worker_->post([this, c, work = std::move(work)]() {
    if (!deferred_error_.empty()) {
      c->error = "an earlier call failed: " + deferred_error_;
      c->code = "ERR_RLLOOP_INTERNAL";
      deferred_error_.clear();
    } else {
      try {
        c->result = work();
      } catch (...) {
        describe_exception(std::current_exception(), c->error, c->code);
        if (c->error.empty()) c->error = "failed";
      }
    }
    // BlockingCall only fails while the environment shuts down; the completion is then leaked on purpose
    // (its JS references may only be released on the JS thread).
    tsfn_.BlockingCall(c);
  }, operation);
  return promise;
}

void AsyncRunner::post(const std::string& operation, std::function<void()> work) {
  worker_->post([this, operation, work = std::move(work)]() {
    try {
      work();
    } catch (...) {
      std::string message, code;
      describe_exception(std::current_exception(), message, code);
      if (deferred_error_.empty()) deferred_error_ = operation + ": " + message;
    }
  }, operation);
}

}  // namespace rlloop
