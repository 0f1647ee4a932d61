#include "base/check.h"

#include <cstring>

namespace rlloop {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Invalid: return "ERR_RLLOOP_INVALID";
    case ErrorCode::NotFound: return "ERR_RLLOOP_NOT_FOUND";
    case ErrorCode::Io: return "ERR_RLLOOP_IO";
    case ErrorCode::Format: return "ERR_RLLOOP_FORMAT";
    case ErrorCode::Shape: return "ERR_RLLOOP_SHAPE";
    case ErrorCode::Unsupported: return "ERR_RLLOOP_UNSUPPORTED";
    case ErrorCode::Internal: return "ERR_RLLOOP_INTERNAL";
  }
  return "ERR_RLLOOP_INTERNAL";
}

static std::string base_name(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

Error::Error(ErrorCode code, const std::string& message, const char* file, int line)
    : std::runtime_error(message + " (" + base_name(file) + ":" + std::to_string(line) + ")"),
      code_(code),
      detail_(message) {}

namespace detail {
void fail(ErrorCode code, const std::string& message, const char* file, int line) {
  throw Error(code, message, file, line);
}
}  // namespace detail

}  // namespace rlloop
