// File helpers with error messages that name the path and the OS reason, and the atomic-write discipline used for
// everything the trainer publishes (adapters, optimizer state): write to a temporary name, fsync, rename.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace rlloop {

std::string read_text_file(const std::string& path);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
void make_directories(const std::string& path);  // mkdir -p

// Writes `bytes` to `path` through `path.tmp-<pid>-<n>`: write, fsync, rename, fsync the parent directory.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Same, for large outputs: `produce` calls `sink(data, size)` as often as it likes.
using ByteSink = std::function<void(const void* data, size_t size)>;
void write_file_atomic_streamed(const std::string& path, const std::function<void(const ByteSink& sink)>& produce);
// Creates a fresh sibling directory `<path>.tmp-<pid>-<n>` and returns its path.
std::string make_temp_sibling_directory(const std::string& path);
// Renames `from` to `to` (both in the same directory) and fsyncs that directory.
void rename_and_sync(const std::string& from, const std::string& to);
void fsync_path(const std::string& path);  // a file or a directory
std::string parent_directory(const std::string& path);

}  // namespace rlloop
