// Checkpoint loading: a Hugging Face folder with model.safetensors or model.safetensors.index.json + shards.
// Modules request their tensors through a prefix-scoped WeightScope (candle's VarBuilder idea): the key is the
// module path, so names never get spelled out twice, and every failure names the key, the file, expected and actual.
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace rlloop {

// Where a model's tensors come from: a checkpoint (CheckpointReader), or zeros for a stand-in model
// (io/zero_weights.h).
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor under `key`, of `shape`, in dtype on device.
  virtual at::Tensor get(const std::string& key, const std::vector<int64_t>& shape, at::ScalarType dtype,
                         at::Device device) = 0;
  // Called once every module has its tensors: fails when the source holds tensors no module asked for.
  virtual void check_all_used() const = 0;
};

class CheckpointReader : public WeightSource {
 public:
  explicit CheckpointReader(const std::string& dir);

  // The tensor under `key`, checked against `shape`, converted to dtype on device.
  at::Tensor get(const std::string& key, const std::vector<int64_t>& shape, at::ScalarType dtype, at::Device device) override;
  // Fails when the checkpoint holds tensors that no module asked for (besides mtp.*, which Qwen3.5 checkpoints
  // carry for multi-token prediction and transformers ignores): they mean the config does not describe the file.
  void check_all_used() const override;

 private:
  std::string dir_;
  std::map<std::string, std::string> key_to_file_;  // tensor key -> shard file name
  std::map<std::string, std::unique_ptr<SafetensorsFile>> open_;
  std::set<std::string> used_;

  SafetensorsFile& file(const std::string& name);
};

class WeightScope {
 public:
  WeightScope(WeightSource& reader, std::string prefix, at::ScalarType dtype, at::Device device)
      : reader_(&reader), prefix_(std::move(prefix)), dtype_(dtype), device_(device) {}

  WeightScope sub(const std::string& name) const { return WeightScope(*reader_, prefix_ + name + ".", dtype_, device_); }
  at::Tensor get(const std::string& name, const std::vector<int64_t>& shape) const {
    return reader_->get(prefix_ + name, shape, dtype_, device_);
  }
  at::Tensor get_as(const std::string& name, const std::vector<int64_t>& shape, at::ScalarType dtype) const {
    return reader_->get(prefix_ + name, shape, dtype, device_);
  }
  const std::string& prefix() const { return prefix_; }
  at::ScalarType dtype() const { return dtype_; }
  at::Device device() const { return device_; }

 private:
  WeightSource* reader_;
  std::string prefix_;
  at::ScalarType dtype_;
  at::Device device_;
};

}  // namespace rlloop
