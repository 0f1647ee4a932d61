#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "check.h"

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

void write_file_atomic_streamed(const std::string& path, const std::function<void(const ByteSink& sink)>& produce) {
  make_directories(parent_directory(path));
  std::string tmp = path + temp_suffix();
  try {
    Fd fd(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    ByteSink sink = [&](const void* data, size_t size) {
      const char* bytes = static_cast<const char*>(data);
      size_t done = 0;
      while (done < size) {
        ssize_t n = ::write(fd.get(), bytes + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        RLLOOP_CHECK(n >= 0, Io, "cannot write '" << tmp << "': " << os_reason());
        done += static_cast<size_t>(n);
      }
    };
    produce(sink);
    RLLOOP_CHECK(::fsync(fd.get()) == 0, Io, "fsync '" << tmp << "' failed: " << os_reason());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  rename_and_sync(tmp, path);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic_streamed(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

std::string make_temp_sibling_directory(const std::string& path) {
  make_directories(parent_directory(path));
  std::string tmp = path + temp_suffix();
  RLLOOP_CHECK(::mkdir(tmp.c_str(), 0755) == 0, Io, "cannot create directory '" << tmp << "': " << os_reason());
  return tmp;
}

}  // namespace rlloop
