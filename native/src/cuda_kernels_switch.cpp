#include "cuda_kernels_switch.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace rlloop {

bool cuda_kernel_enabled(std::string_view name) {
#ifdef RLLOOP_CUDA
  static const std::string setting = [] {
    const char* v = std::getenv("RLLOOP_KERNELS");  // read once per process
    return std::string(v ? v : "");
  }();
  if (setting == "0") return false;
  const std::string entry = "-" + std::string(name);
  for (size_t start = 0; start <= setting.size();) {
    const size_t end = std::min(setting.find(',', start), setting.size());
    if (std::string_view(setting).substr(start, end - start) == entry) return false;
    start = end + 1;
  }
  return true;
#else
  (void)name;
  return false;
#endif
}

}  // namespace rlloop
