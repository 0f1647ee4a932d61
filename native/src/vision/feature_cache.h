// The frozen vision tower's features of images seen earlier, by a caller-chosen key (the trainer uses the frame
// file's path, size and mtime): a PPO round reads each row's frame four times (old and ref log-probs, two
// epochs), and the tower's output never changes, so it is computed once. Bounded by bytes; when full, new
// features are simply not kept (no eviction: a key the caller saw cached stays cached until clear()).
// Thread-safe: the JS thread asks contains() while the model's worker thread adds entries.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace rlloop {

class VisionCache {
 public:
  explicit VisionCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  bool contains(const std::string& key) const;
  at::Tensor get(const std::string& key) const;  // undefined when absent
  void put(const std::string& key, const at::Tensor& features);  // ignored when it would exceed the budget
  void clear();
  int64_t bytes() const;
  int64_t entries() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, at::Tensor> features_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
};

}  // namespace rlloop
