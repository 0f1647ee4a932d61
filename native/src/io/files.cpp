#include "io/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>

#include "base/check.h"

namespace rlloop {

namespace {
std::string os_reason() { return std::strerror(errno); }

std::string temp_suffix() {
  static std::atomic<int> counter{0};
  return ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// RAII file descriptor.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0644) : fd_(::open(path.c_str(), flags, mode)) {
    RLLOOP_CHECK(fd_ >= 0, Io, "cannot open '" << path << "': " << os_reason());
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};
}  // namespace

std::string read_text_file(const std::string& path) {
  RLLOOP_CHECK(path_exists(path), NotFound, "file not found: '" << path << "'");
  std::ifstream in(path, std::ios::binary);
  RLLOOP_CHECK(in, Io, "cannot open '" << path << "': " << os_reason());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  RLLOOP_CHECK(!in.bad(), Io, "cannot read '" << path << "': " << os_reason());
  return buffer.str();
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void make_directories(const std::string& path) {
  if (path.empty() || is_directory(path)) return;
  make_directories(parent_directory(path));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    RLLOOP_FAIL(Io, "cannot create directory '" << path << "': " << os_reason());
}

void fsync_path(const std::string& path) {
  Fd fd(path, O_RDONLY);
  RLLOOP_CHECK(::fsync(fd.get()) == 0, Io, "fsync '" << path << "' failed: " << os_reason());
}

void rename_and_sync(const std::string& from, const std::string& to) {
  RLLOOP_CHECK(::rename(from.c_str(), to.c_str()) == 0, Io,
               "cannot rename '" << from << "' to '" << to << "': " << os_reason());
  fsync_path(parent_directory(to));
}

namespace {
// Writes the bytes [begin, end) of the spans laid end to end at those offsets of the file.
void write_share(int fd, const std::string& path, const std::vector<ByteSpan>& spans, uint64_t begin, uint64_t end) {
  uint64_t span_start = 0;
  for (const ByteSpan& span : spans) {
    const uint64_t from = std::max(begin, span_start), to = std::min<uint64_t>(end, span_start + span.size);
    for (uint64_t at = from; at < to;) {
      const ssize_t n = ::pwrite(fd, static_cast<const char*>(span.data) + (at - span_start), to - at, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      RLLOOP_CHECK(n > 0, Io, "cannot write '" << path << "': " << (n == 0 ? std::string("no progress") : os_reason()));
      at += static_cast<uint64_t>(n);
    }
    span_start += span.size;
    if (span_start >= end) return;
  }
}

// The file's bytes cut into `shares` runs of about equal size, written at once (std::async: the futures join).
void write_shares(int fd, const std::string& path, const std::vector<ByteSpan>& spans, uint64_t total, int shares) {
  const uint64_t per_share = (total + shares - 1) / shares;
  std::vector<std::future<void>> others;
  for (int i = 1; i < shares; ++i)
    others.push_back(std::async(std::launch::async, write_share, fd, std::cref(path), std::cref(spans), i * per_share,
                                std::min(total, (i + 1) * per_share)));
  write_share(fd, path, spans, 0, std::min(total, per_share));
  for (std::future<void>& share : others) share.get();
}
}  // namespace

void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& spans, int threads) {
  constexpr uint64_t kBytesPerThread = uint64_t{1} << 20;
  make_directories(parent_directory(path));
  std::string tmp = path + temp_suffix();
  uint64_t total = 0;
  for (const ByteSpan& span : spans) total += span.size;
  const int shares = static_cast<int>(std::clamp<uint64_t>(total / kBytesPerThread, 1, std::max(threads, 1)));
  try {
    Fd fd(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    write_shares(fd.get(), tmp, spans, total, shares);
    RLLOOP_CHECK(::fsync(fd.get()) == 0, Io, "fsync '" << tmp << "' failed: " << os_reason());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  rename_and_sync(tmp, path);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, {ByteSpan{bytes.data(), bytes.size()}}, 1);
}

std::string make_temp_sibling_directory(const std::string& path) {
  make_directories(parent_directory(path));
  std::string tmp = path + temp_suffix();
  RLLOOP_CHECK(::mkdir(tmp.c_str(), 0755) == 0, Io, "cannot create directory '" << tmp << "': " << os_reason());
  return tmp;
}

}  // namespace rlloop
