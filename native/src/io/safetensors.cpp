#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/check.h"
#include "io/files.h"
#include "io/json.h"

namespace rlloop {

namespace {

// The safetensors dtype names we read and write.
struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F32", at::kFloat}, {"BF16", at::kBFloat16}, {"F16", at::kHalf}, {"F64", at::kDouble},
    {"I64", at::kLong},  {"I32", at::kInt},       {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},   {"BOOL", at::kBool},
};

bool dtype_from_name(const std::string& name, at::ScalarType& out) {
  for (const auto& d : kDtypes)
    if (name == d.name) {
      out = d.type;
      return true;
    }
  return false;
}

const char* dtype_to_name(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  RLLOOP_FAIL(Unsupported, "cannot write a " << c10::toString(type) << " tensor to safetensors");
}

}  // namespace

std::string shape_string(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  RLLOOP_CHECK(path_exists(path), NotFound, "file not found: '" << path << "'");
  int fd = ::open(path.c_str(), O_RDONLY);
  RLLOOP_CHECK(fd >= 0, Io, "cannot open '" << path << "': " << std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    RLLOOP_FAIL(Io, "cannot stat '" << path << "': " << std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    RLLOOP_CHECK(map_ != MAP_FAILED, Io, "cannot mmap '" << path << "': " << std::strerror(err));
  } else {
    ::close(fd);
  }
  try {
    parse_header();
  } catch (...) {
    if (map_ && map_ != MAP_FAILED) ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ && map_ != MAP_FAILED) ::munmap(map_, size_);
}

void SafetensorsFile::parse_header() {
  RLLOOP_CHECK(size_ >= 8, Format, "'" << path_ << "' is not a safetensors file: " << size_ << " bytes, no header");
  const uint8_t* bytes = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian
  RLLOOP_CHECK(header_len <= size_ - 8 && header_len < (100u << 20), Format,
               "'" << path_ << "' has a corrupt safetensors header: header length " << header_len << " but the file has "
                   << size_ << " bytes");
  data_ = bytes + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  std::string text(reinterpret_cast<const char*>(bytes + 8), header_len);
  Json header = parse_json(text, "safetensors header of '" + path_ + "'");
  for (const auto& [key, value] : json_object(header, "safetensors header of '" + path_ + "'")) {
    if (key == "__metadata__") {
      for (const auto& [mk, mv] : json_object(value, "__metadata__"))
        if (mv.is_string()) metadata_[mk] = json_string(mv, mk);
      continue;
    }
    std::string what = "'" + path_ + "' entry '" + key + "'";
    SafetensorsEntry e;
    e.key = key;
    const Json* dtype = json_member(value, "dtype");
    const Json* shape = json_member(value, "shape");
    const Json* offsets = json_member(value, "data_offsets");
    RLLOOP_CHECK(dtype && shape && offsets, Format, what << " lacks dtype, shape or data_offsets");
    e.dtype_name = json_string(*dtype, what + " dtype");
    RLLOOP_CHECK(dtype_from_name(e.dtype_name, e.dtype), Unsupported, what << " has unsupported dtype " << e.dtype_name);
    int64_t numel = 1;
    for (const Json& d : json_array(*shape, what + " shape")) {
      int64_t n = json_int(d, what + " shape");
      RLLOOP_CHECK(n >= 0, Format, what << " has a negative dimension");
      e.shape.push_back(n);
      numel *= n;
    }
    const auto& range = json_array(*offsets, what + " data_offsets");
    RLLOOP_CHECK(range.size() == 2, Format, what << " data_offsets must have 2 entries");
    int64_t begin = json_int(range[0], what + " data_offsets"), end = json_int(range[1], what + " data_offsets");
    RLLOOP_CHECK(begin >= 0 && begin <= end && static_cast<uint64_t>(end) <= data_size, Format,
                 what << " data_offsets [" << begin << ", " << end << "] lie outside the data section of "
                      << data_size << " bytes (truncated or corrupt file)");
    e.begin = static_cast<uint64_t>(begin);
    e.end = static_cast<uint64_t>(end);
    uint64_t expected = static_cast<uint64_t>(numel) * c10::elementSize(e.dtype);
    RLLOOP_CHECK(e.end - e.begin == expected, Format,
                 what << " holds " << (e.end - e.begin) << " bytes but " << e.dtype_name << " " << shape_string(e.shape)
                      << " needs " << expected);
    entries_.emplace(key, std::move(e));
  }
  check_tiling(data_size);
}

// The format (and its reference implementation, which refuses anything else) has the tensors tile the data section
// exactly: sorted by offset, each begins where the previous ends, the last ends at the file's end. Two entries
// sharing bytes would read one tensor's numbers as another's, silently; bytes after the last are data nothing names.
void SafetensorsFile::check_tiling(uint64_t data_size) const {
  std::vector<const SafetensorsEntry*> spans;
  spans.reserve(entries_.size());
  for (const auto& [key, e] : entries_) spans.push_back(&e);
  std::sort(spans.begin(), spans.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : spans) {
    RLLOOP_CHECK(e->begin >= at, Format,
                 "'" << path_ << "' entry '" << e->key << "' data_offsets [" << e->begin << ", " << e->end << "] overlap entry '"
                     << (previous ? previous->key : "") << "' (tensors must not share bytes)");
    RLLOOP_CHECK(e->begin == at, Format,
                 "'" << path_ << "' has " << (e->begin - at) << " bytes no tensor names before entry '" << e->key
                     << "' (tensors must tile the data section)");
    at = e->end;
    previous = e;
  }
  RLLOOP_CHECK(at == data_size, Format,
               "'" << path_ << "' has " << (data_size - at) << " trailing bytes after its last tensor (tensors must tile the data section)");
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

at::Tensor SafetensorsFile::load(const SafetensorsEntry& entry, at::ScalarType dtype, at::Device device) const {
  const uint8_t* ptr = data_ + entry.begin;
  auto cpu_options = at::TensorOptions().dtype(entry.dtype).device(at::kCPU);
  at::Tensor source;
  if (reinterpret_cast<uintptr_t>(ptr) % c10::elementSize(entry.dtype) == 0) {
    // Aliases the mapping; the copy below detaches it before the mapping goes away.
    source = at::from_blob(const_cast<uint8_t*>(ptr), entry.shape, cpu_options);
  } else {
    source = at::empty(entry.shape, cpu_options);
    std::memcpy(source.data_ptr(), ptr, entry.end - entry.begin);
  }
  at::Tensor out = source.to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
  return out;
}

std::map<std::string, at::Tensor> SafetensorsFile::load_all(at::ScalarType dtype, at::Device device) const {
  std::map<std::string, at::Tensor> out;
  // Each entry's view must be aligned for its dtype: within the data section for a device (the upload lands in a
  // fresh allocation), at its address in the mapping on the CPU (a header not padded to 8 bytes moves them all).
  const uintptr_t base = device.is_cpu() ? reinterpret_cast<uintptr_t>(data_) : 0;
  const auto aligned = [&](const SafetensorsEntry& e) { return (base + e.begin) % c10::elementSize(e.dtype) == 0; };
  // (on the CPU the same path, whose "upload" aliases the mapping: the tests run the splitting the GPU runs)
  const bool one_upload = !entries_.empty() &&
                          std::all_of(entries_.begin(), entries_.end(), [&](const auto& kv) { return aligned(kv.second); });
  if (!one_upload) {
    for (const auto& [key, entry] : entries_) out.emplace(key, load(entry, dtype, device));
    return out;
  }
  uint64_t data_size = 0;  // the entries tile the data section (check_tiling)
  for (const auto& [key, entry] : entries_) data_size = std::max(data_size, entry.end);
  const at::Tensor bytes = at::from_blob(const_cast<uint8_t*>(data_), {static_cast<int64_t>(data_size)}, at::kByte).to(device);
  for (const auto& [key, entry] : entries_) {
    const at::Tensor stored = bytes.narrow(0, static_cast<int64_t>(entry.begin), static_cast<int64_t>(entry.end - entry.begin))
                                  .view(entry.dtype)
                                  .view(entry.shape);
    out.emplace(key, stored.to(dtype, /*non_blocking=*/false, /*copy=*/true));
  }
  return out;
}

namespace {
// Contiguous host copies. Tensors of one dtype on one device go through one concatenation and one copy: an adapter
// and its optimizer state are ~1600 tensors, and on a GPU each copy of its own waits on the stream. (On the CPU that
// costs a copy, which keeps the tests on the path the GPU takes.)
std::vector<at::Tensor> host_copies(const NamedTensorList& tensors) {
  std::vector<at::Tensor> out;
  const auto same_as_first = [&](const auto& entry) {
    return entry.second.device() == tensors.front().second.device() && entry.second.dtype() == tensors.front().second.dtype();
  };
  if (tensors.empty() || !std::all_of(tensors.begin(), tensors.end(), same_as_first)) {
    for (const auto& [key, tensor] : tensors) out.push_back(tensor.detach().to(at::kCPU).contiguous());
    return out;
  }
  std::vector<at::Tensor> flat;
  for (const auto& [key, tensor] : tensors) flat.push_back(tensor.detach().reshape({-1}));
  const at::Tensor on_device = at::cat(flat);
  at::Tensor all = on_device;
  if (!on_device.is_cpu()) {
    // into page-locked memory: the copy runs at the link's speed, and the caching host allocator hands the same
    // buffer to the next save (a resident rank saves every round)
    try {
      all = at::empty(on_device.sizes(), on_device.options().device(at::kCPU).pinned_memory(true));
    } catch (const c10::Error&) {
      all = at::empty(on_device.sizes(), on_device.options().device(at::kCPU));  // no page-locked memory left
    }
    all.copy_(on_device);
  }
  int64_t offset = 0;
  for (const auto& [key, tensor] : tensors) {
    out.push_back(all.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
  return out;
}
}  // namespace

void reserve_host_copies(const std::vector<int64_t>& bytes) {
  for (const int64_t n : bytes) {
    try {
      at::empty({n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));  // freed at once: cached for a save
    } catch (const c10::Error&) {
      return;  // no page-locked memory left: the saves fall back on their own
    }
  }
}

SafetensorsImage::SafetensorsImage(const NamedTensorList& tensors, const std::map<std::string, std::string>& metadata)
    : host_(host_copies(tensors)) {
  // The header's offsets follow the host copies' sizes, so they and the bytes agree.
  Json header;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& key = tensors[i].first;
    RLLOOP_CHECK(key != "__metadata__" && !header.contains(key), Invalid, "safetensors: duplicate or reserved key '" << key << "'");
    const at::Tensor& t = host_[i];
    Json entry;
    entry["dtype"] = Json(dtype_to_name(t.scalar_type()));
    Json::array_t shape;
    for (int64_t d : t.sizes()) shape.emplace_back(d);
    entry["shape"] = Json(std::move(shape));
    uint64_t bytes = t.numel() * t.element_size();
    entry["data_offsets"] = Json::array({static_cast<int64_t>(offset), static_cast<int64_t>(offset + bytes)});
    header[key] = entry;
    offset += bytes;
  }
  Json meta = Json::object();
  for (const auto& [k, v] : metadata) meta[k] = Json(v);
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // the data section starts 8-byte aligned, as safetensors writes
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) header_ += static_cast<char>(static_cast<uint8_t>(len >> (8 * i)));
  header_ += text;
}

void SafetensorsImage::write(const std::string& path) const {
  std::vector<ByteSpan> spans{{header_.data(), header_.size()}};
  for (const at::Tensor& t : host_) spans.push_back({t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size())});
  write_file_atomic(path, spans);
}

}  // namespace rlloop
