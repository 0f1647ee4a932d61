#include "io/weights.h"

#include "base/check.h"
#include "io/files.h"
#include "io/json.h"

namespace rlloop {

namespace {
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
}  // namespace

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  RLLOOP_CHECK(is_directory(dir), NotFound, "model directory not found: '" << dir << "'");
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  if (path_exists(index_path)) {
    Json index = parse_json(read_text_file(index_path), index_path);
    const Json* map = json_member(index, "weight_map");
    RLLOOP_CHECK(map, Format, index_path << ": missing field 'weight_map'");
    for (const auto& [key, file] : json_object(*map, index_path + " weight_map"))
      key_to_file_[key] = json_string(file, index_path + " weight_map['" + key + "']");
  } else {
    RLLOOP_CHECK(path_exists(single_path), NotFound,
                 "no model.safetensors or model.safetensors.index.json in '" << dir << "'");
    for (const auto& [key, entry] : file("model.safetensors").entries()) key_to_file_[key] = "model.safetensors";
  }
}

SafetensorsFile& CheckpointReader::file(const std::string& name) {
  auto it = open_.find(name);
  if (it == open_.end()) it = open_.emplace(name, std::make_unique<SafetensorsFile>(dir_ + "/" + name)).first;
  return *it->second;
}

at::Tensor CheckpointReader::get(const std::string& key, const std::vector<int64_t>& shape, at::ScalarType dtype,
                                 at::Device device) {
  auto where = key_to_file_.find(key);
  RLLOOP_CHECK(where != key_to_file_.end(), NotFound,
               "missing tensor '" << key << "' (expected shape " << shape_string(shape) << ") in checkpoint '" << dir_
                                  << "'");
  SafetensorsFile& f = file(where->second);
  const SafetensorsEntry* entry = f.find(key);
  RLLOOP_CHECK(entry, NotFound, "missing tensor '" << key << "' in '" << f.path() << "' (the index names this file)");
  RLLOOP_CHECK(entry->shape == shape, Shape,
               "tensor '" << key << "' in '" << f.path() << "' has shape " << shape_string(entry->shape)
                          << ", expected " << shape_string(shape));
  RLLOOP_CHECK(at::isFloatingType(entry->dtype), Unsupported,
               "tensor '" << key << "' in '" << f.path() << "' has dtype " << entry->dtype_name
                          << "; BF16, F16 or F32 expected");
  used_.insert(key);
  return f.load(*entry, dtype, device);
}

void CheckpointReader::check_all_used() const {
  std::vector<std::string> unused;
  for (const auto& [key, file] : key_to_file_)
    if (!used_.count(key) && !starts_with(key, "mtp.")) unused.push_back(key + " (" + file + ")");
  if (unused.empty()) return;
  std::string list;
  for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
  RLLOOP_FAIL(Format, "checkpoint '" << dir_ << "' has " << unused.size() << " tensors that config.json does not describe: "
                                     << list << (unused.size() > 5 ? ", ..." : ""));
}

}  // namespace rlloop
