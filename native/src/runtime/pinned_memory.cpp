#include "runtime/pinned_memory.h"

#include <cstdlib>
#include <mutex>

#ifdef RLLOOP_CUDA
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
    // 8 threads: the count libtorch's benchmarks found best (its note at CUDAAllocatorConfig::pinned_max_register_threads)
    try {
      c10::CachingAllocator::setAllocatorSettings("pinned_use_cuda_host_register:True,pinned_num_register_threads:8");
    } catch (const c10::Error&) {
      // a libtorch that no longer knows these keys: its default pinning is slower at first, never wrong
    }
  });
#endif
}

}  // namespace rlloop
