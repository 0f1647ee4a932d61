#include "vision/feature_cache.h"

namespace rlloop {

bool VisionCache::contains(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return features_.count(key) > 0;
}

at::Tensor VisionCache::get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = features_.find(key);
  return it == features_.end() ? at::Tensor() : it->second;
}

void VisionCache::put(const std::string& key, const at::Tensor& features) {
  const int64_t size = static_cast<int64_t>(features.nbytes());
  std::lock_guard<std::mutex> lock(mutex_);
  if (features_.count(key) > 0 || bytes_ + size > max_bytes_) return;
  // A copy, not a view: a view would keep the whole batch's feature tensor alive.
  features_.emplace(key, features.clone());
  bytes_ += size;
}

void VisionCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  features_.clear();
  bytes_ = 0;
}

int64_t VisionCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t VisionCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(features_.size());
}

}  // namespace rlloop
