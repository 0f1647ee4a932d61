// Allocator statistics of an accelerator (peak GPU memory for progress logs and benchmarks), through ATen's
// device-agnostic accelerator API so the CPU build needs no CUDA headers. The CPU has no caching allocator:
// its figures are zero.
#pragma once
#include <ATen/Device.h>
#include <cstdint>

namespace rlloop {

struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;       // held by live tensors now
  int64_t peak_allocated_bytes = 0;  // since the last reset_peak_memory_stats (or the start)
  int64_t reserved_bytes = 0;        // held by the caching allocator (allocated + cached free blocks)
};

DeviceMemoryStats device_memory_stats(const at::Device& device);
void reset_peak_memory_stats(const at::Device& device);

// Gives the allocator's cached free blocks back to the device (nothing on the CPU): after a model is closed, so that
// its memory is the device's again, not only this process's allocator's. ATen empties the caches of all the
// accelerator's devices at once; a model on another device loses only blocks it was not using.
void release_cached_memory(const at::Device& device);

// The accelerator's total memory in bytes (0 on the CPU).
int64_t device_total_memory(const at::Device& device);

}  // namespace rlloop
