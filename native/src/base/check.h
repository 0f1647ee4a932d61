// Errors of the native module: one exception type carrying a code and the source location, thrown by RLLOOP_CHECK.
// Nothing in native/ aborts or exits: js/binding.cpp turns every exception into a rejected promise / JS Error.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace rlloop {

// Codes let JS callers branch without parsing messages; the message always says what failed and, when known, the fix.
enum class ErrorCode { Invalid, NotFound, Io, Format, Shape, Unsupported, Internal };

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, const char* file, int line);
  ErrorCode code() const { return code_; }
  // The message without the "(file:line)" suffix, for JS.
  const std::string& detail() const { return detail_; }

 private:
  ErrorCode code_;
  std::string detail_;
};

namespace detail {
// Builds the message only when the check fails (the stream expression is not evaluated otherwise).
[[noreturn]] void fail(ErrorCode code, const std::string& message, const char* file, int line);
}  // namespace detail

}  // namespace rlloop

// RLLOOP_CHECK(cond, code, "message " << value): throws rlloop::Error with file:line when cond is false.
#define RLLOOP_CHECK(cond, code, msg)                                                     \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::ostringstream rlloop_check_stream_;                                            \
      rlloop_check_stream_ << msg;                                                        \
      ::rlloop::detail::fail(::rlloop::ErrorCode::code, rlloop_check_stream_.str(), __FILE__, __LINE__); \
    }                                                                                     \
  } while (0)

#define RLLOOP_FAIL(code, msg) RLLOOP_CHECK(false, code, msg)
