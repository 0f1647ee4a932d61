#include "cuda_kernels_switch.h"

#include <cstdlib>
#include <string>

namespace rlloop {

bool cuda_kernels_enabled() {
#ifdef RLLOOP_CUDA
  static const bool enabled = [] {
    const char* v = std::getenv("RLLOOP_KERNELS");  // read once per process
    return !(v && std::string(v) == "0");
  }();
  return enabled;
#else
  return false;
#endif
}

}  // namespace rlloop
