#include "diagnostics/switches.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <initializer_list>
#include <set>

#include "base/check.h"

namespace rlloop {
namespace {

std::string env(const char* name) {
  const char* raw = std::getenv(name);
  return raw ? raw : "";
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string_view item = trim(list.substr(start, end - start));
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

std::string choice(const char* name, std::initializer_list<const char*> choices) {
  const std::string value = env(name);
  if (value.empty()) return *choices.begin();
  std::string listed;
  for (const char* c : choices) {
    if (value == c) return value;
    listed += listed.empty() ? std::string(c) + " (the default)" : std::string(" or ") + c;
  }
  RLLOOP_FAIL(Invalid, name << ": \"" << value << "\" is not " << listed);
}

#ifdef RLLOOP_CUDA
constexpr std::array<std::string_view, 8> kKernelNames = {"conv",   "solve",      "norm",        "qkv_heads",
                                                          "swiglu", "delta_rule", "vision_rope", "rope"};

std::set<std::string, std::less<>> disabled_kernels() {
  const std::string raw = env("RLLOOP_KERNELS");
  const std::string_view setting = trim(raw);
  std::set<std::string, std::less<>> off;
  if (setting == "0") return {kKernelNames.begin(), kKernelNames.end()};
  if (setting.empty() || setting == "1") return off;
  for (const std::string_view entry : split(setting)) {
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
#endif

int64_t positive(std::string_view digits) {
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) return 0;
  return std::stoll(std::string(digits));
}

std::vector<ProfileWindow> parse_windows() {
  const std::string raw = env("RLLOOP_PROFILE_WINDOWS");
  std::vector<ProfileWindow> out;
  for (const std::string_view item : split(raw.empty() ? std::string_view("logprobs#2:1") : std::string_view(raw))) {
    const size_t hash = item.find('#');
    const size_t colon = hash == std::string_view::npos ? hash : item.find(':', hash);
    ProfileWindow w;
    if (colon != std::string_view::npos) {
      w.operation = std::string(item.substr(0, hash));
      w.occurrence = positive(item.substr(hash + 1, colon - hash - 1));
      w.count = positive(item.substr(colon + 1));
    }
    RLLOOP_CHECK(!w.operation.empty() && w.occurrence > 0 && w.count > 0, Invalid,
                 "RLLOOP_PROFILE_WINDOWS: \"" << item << "\" is not operation#k:count (k and count from 1)");
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

bool cuda_kernel_enabled(std::string_view name) {
#ifdef RLLOOP_CUDA
  static const std::set<std::string, std::less<>> off = disabled_kernels();
  return off.find(name) == off.end();
#else
  (void)name;
  return false;
#endif
}

bool cpu_delta_rule_runs_kernels() {
  static const bool kernels = choice("RLLOOP_DELTA_RULE_CPU", {"chunks", "kernels"}) == "kernels";
  return kernels;
}

bool delta_rule_backward_is_manual() {
  static const bool manual = choice("RLLOOP_GDN_BACKWARD", {"manual", "autograd"}) == "manual";
  return manual;
}

const std::string& profile_trace_path() {
  static const std::string path = env("RLLOOP_PROFILE_TRACE");
  return path;
}

const std::vector<ProfileWindow>& profile_windows() {
  static const std::vector<ProfileWindow> windows = parse_windows();
  return windows;
}

const std::string& backward_timeline_path() {
  static const std::string path = env("RLLOOP_BACKWARD_TIMELINE");
  return path;
}

}  // namespace rlloop
