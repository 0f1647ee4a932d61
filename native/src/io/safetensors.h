// safetensors files: reading through mmap (header parsed and every entry's offsets validated up front) and atomic
// writing (used for adapters and optimizer state). Format: 8-byte little-endian header length, a JSON header
// {key: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the raw little-endian data.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rlloop {

struct SafetensorsEntry {
  std::string key;
  std::string dtype_name;  // as written in the file ("BF16", ...)
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws on a missing file or a corrupt header
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(const std::string& key) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A copy of the tensor converted to dtype on device (the mapping is released with this object).
  at::Tensor load(const SafetensorsEntry& entry, at::ScalarType dtype, at::Device device) const;
  // Every tensor, each a copy of its own converted to dtype on device. On an accelerator the data section goes up in
  // one copy and is split there: an adapter is ~500 tensors and its optimizer state ~1000, and a copy of each on its
  // own waits on the stream. (Per tensor only when some entry's offset is not a multiple of its element size.)
  std::map<std::string, at::Tensor> load_all(at::ScalarType dtype, at::Device device) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;

  void parse_header();
  void check_tiling(uint64_t data_size) const;
};

std::string shape_string(at::IntArrayRef shape);  // "[2, 3]"

// Writing tensors (any device; float32/bfloat16/float16/int64/int32 kept as they are) atomically, in two steps: the
// constructor copies them to the host on the calling thread (the one whose CUDA stream produced them); write() then
// needs no device and can run on any thread, so that several files are written at once.
using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;

class SafetensorsImage {
 public:
  explicit SafetensorsImage(const NamedTensorList& tensors,
                            const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  void write(const std::string& path) const;

 private:
  std::string header_;  // the 8-byte length, then the JSON header padded to 8 bytes
  std::vector<at::Tensor> host_;
};

// Page-locked host memory for host copies of these sizes (bytes): pinned now and handed back at once to the caching
// host allocator, where a SafetensorsImage of a CUDA device's tensors of that total size finds it. Otherwise a
// rank's first save pins its buffers itself (0.5-0.8 s for an adapter and its optimizer state at the 9B shapes).
// Blocks the calling thread while it pins; memory that cannot be pinned is not an error (the save then falls back
// to ordinary memory, as it would have).
void reserve_host_copies(const std::vector<int64_t>& bytes);

}  // namespace rlloop
