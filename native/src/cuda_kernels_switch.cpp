#include "cuda_kernels_switch.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <string>

#include "check.h"

namespace rlloop {
#ifdef RLLOOP_CUDA
namespace {

constexpr std::array<std::string_view, 7> kKernelNames = {"conv",   "solve",      "norm",       "qkv_heads",
                                                          "swiglu", "delta_rule", "vision_rope"};

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// RLLOOP_KERNELS → the names turned off ("0": all of them). An entry that is not "-<known name>" is an error, so
// a typo cannot silently leave a kernel on.
std::set<std::string, std::less<>> disabled_kernels() {
  const char* raw = std::getenv("RLLOOP_KERNELS");
  const std::string_view setting = trim(raw ? raw : "");
  std::set<std::string, std::less<>> off;
  if (setting == "0") {
    off.insert(kKernelNames.begin(), kKernelNames.end());
    return off;
  }
  if (setting.empty() || setting == "1") return off;
  for (size_t start = 0; start <= setting.size();) {
    const size_t end = std::min(setting.find(',', start), setting.size());
    const std::string_view entry = trim(setting.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    const std::string_view name = entry.substr(1);
    if (entry.front() != '-' || std::find(kKernelNames.begin(), kKernelNames.end(), name) == kKernelNames.end()) {
      std::string names;
      for (const std::string_view known : kKernelNames) names += (names.empty() ? "-" : ", -") + std::string(known);
      RLLOOP_FAIL(Invalid, "RLLOOP_KERNELS: \"" << entry << "\" is not one of 0, 1 or a comma-separated list of " << names);
    }
    off.emplace(name);
  }
  return off;
}

}  // namespace
#endif

bool cuda_kernel_enabled(std::string_view name) {
#ifdef RLLOOP_CUDA
  static const std::set<std::string, std::less<>> off = disabled_kernels();  // read once per process
  return off.find(name) == off.end();
#else
  (void)name;
  return false;
#endif
}

}  // namespace rlloop
