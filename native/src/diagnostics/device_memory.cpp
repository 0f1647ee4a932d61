#include "diagnostics/device_memory.h"

#include <ATen/DeviceAccelerator.h>

namespace rlloop {

namespace {
// The aggregate row of the allocator's per-pool statistics (index 0 = all pools).
constexpr size_t kAllPools = 0;
}  // namespace

DeviceMemoryStats device_memory_stats(const at::Device& device) {
  DeviceMemoryStats out;
  if (device.is_cpu()) return out;
  const auto stats = at::accelerator::getDeviceStats(device.index());
  out.allocated_bytes = stats.allocated_bytes[kAllPools].current;
  out.peak_allocated_bytes = stats.allocated_bytes[kAllPools].peak;
  out.reserved_bytes = stats.reserved_bytes[kAllPools].current;
  return out;
}

void reset_peak_memory_stats(const at::Device& device) {
  if (!device.is_cpu()) at::accelerator::resetPeakStats(device.index());
}

void release_cached_memory(const at::Device& device) {
  if (!device.is_cpu()) at::accelerator::emptyCache();
}

int64_t device_total_memory(const at::Device& device) {
  if (device.is_cpu()) return 0;
  return static_cast<int64_t>(at::accelerator::getMemoryInfo(device.index()).second);
}

}  // namespace rlloop
