#include "runtime/pinned_memory.h"

#include <cstdlib>
#include <mutex>

#ifdef RLLOOP_CUDA
#include <ATen/ATen.h>
#include <c10/core/AllocatorConfig.h>
#endif

namespace rlloop {

void configure_pinned_memory() {
#ifdef RLLOOP_CUDA
  static std::once_flag once;
  std::call_once(once, [] {
    const auto set = [](const char* name) {
      const char* value = std::getenv(name);
      return value != nullptr && *value != '\0';
    };
    if (set("PYTORCH_CUDA_ALLOC_CONF") || set("PYTORCH_ALLOC_CONF")) return;
    // Parsing a settings string resets the device allocator's other settings to their defaults, which they are
    // when neither variable is set; and nothing else in our processes uses the device yet (a rank joins its process
    // group after its model loads: src/train/rank-process.ts).
    try {
      // 8 threads: the count libtorch's benchmarks found best (its note at pinned_max_register_threads)
      c10::CachingAllocator::setAllocatorSettings("pinned_use_cuda_host_register:True,pinned_num_register_threads:8");
      // A host where registering fails (some virtualised or confidential-computing GPUs) fails here, once, rather
      // than every batch's upload later; this first registered block also starts libtorch's register threads.
      at::empty({1 << 20}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    } catch (...) {
      // libtorch's default pinning: slower to start, never wrong
      try {
        c10::CachingAllocator::setAllocatorSettings("pinned_use_cuda_host_register:False");
      } catch (...) {
      }
    }
  });
#endif
}

}  // namespace rlloop
