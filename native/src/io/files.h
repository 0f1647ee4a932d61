// File helpers with error messages that name the path and the OS reason, and the atomic-write discipline used for
// everything the trainer publishes (adapters, optimizer state): write to a temporary name, fsync, rename.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace rlloop {

std::string read_text_file(const std::string& path);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
void make_directories(const std::string& path);  // mkdir -p

// Writes `bytes` to `path` through `path.tmp-<pid>-<n>`: write, fsync, rename, fsync the parent directory.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Same, for large outputs: the spans one after another, written by up to `threads` threads at once, each its own
// share of the file's bytes (pwrite at their offsets). One thread's write() copies into the page cache at a few
// GB/s, well below the memory's bandwidth; a file gets at most one thread a MiB.
struct ByteSpan {
  const void* data;
  size_t size;
};
void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& spans, int threads = 4);
// Creates a fresh sibling directory `<path>.tmp-<pid>-<n>` and returns its path.
std::string make_temp_sibling_directory(const std::string& path);
// Renames `from` to `to` (both in the same directory) and fsyncs that directory.
void rename_and_sync(const std::string& from, const std::string& to);
void fsync_path(const std::string& path);  // a file or a directory
std::string parent_directory(const std::string& path);

}  // namespace rlloop
