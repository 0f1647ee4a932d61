#include "diagnostics/backward_timeline.h"

#include <ATen/DeviceAccelerator.h>
#include <c10/core/Event.h>

#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "base/check.h"
#include "diagnostics/switches.h"
#include "io/json.h"

namespace rlloop {

// A point in the backward's execution: a device event on an accelerator (recorded on the stream doing the work),
// a clock reading on the CPU (whose backward runs synchronously on the calling thread).
struct TimelineStamp {
  std::optional<c10::Event> event;
  std::chrono::steady_clock::time_point cpu;
};

struct BackwardTimeline::Impl {
  Impl(at::Device d, std::string p) : device(d), path(std::move(p)) {}

  at::Device device;
  std::string path;
  std::mutex mutex;  // hooks run on the autograd engine's device thread
  std::vector<std::pair<std::string, TimelineStamp>> marks;  // in execution order: the segment that runs after each
  struct NodeSpan {
    const char* node;
    TimelineStamp begin, end;
  };
  std::vector<NodeSpan> node_spans;  // read in finish(), after the device is done: no waiting inside the backward

  TimelineStamp stamp() const {
    TimelineStamp s;
    if (device.is_cpu()) {
      s.cpu = std::chrono::steady_clock::now();
    } else {
      s.event.emplace(device.type(), c10::EventFlag::BACKEND_DEFAULT);  // timing enabled
      s.event->record(at::accelerator::getCurrentStream(device.index()));
    }
    return s;
  }

  static double elapsed_ms(const TimelineStamp& from, const TimelineStamp& to) {
    if (from.event) return from.event->elapsedTime(*to.event);
    return std::chrono::duration<double, std::milli>(to.cpu - from.cpu).count();
  }

  void record(const std::string& segment) {
    TimelineStamp s = stamp();
    std::lock_guard<std::mutex> lock(mutex);
    marks.emplace_back(segment, std::move(s));
  }
};

namespace {

std::mutex active_mutex;
std::shared_ptr<BackwardTimeline::Impl> active_impl;  // the timeline of the backward in progress, if any

std::shared_ptr<BackwardTimeline::Impl> active() {
  std::lock_guard<std::mutex> lock(active_mutex);
  return active_impl;
}

const char* timeline_path() {
  const std::string& path = backward_timeline_path();
  return path.empty() ? nullptr : path.c_str();
}

}  // namespace

std::shared_ptr<BackwardTimeline> BackwardTimeline::begin(const at::Device& device) {
  const char* path = timeline_path();
  if (!path) return nullptr;
  auto impl = std::make_shared<Impl>(device, path);
  std::lock_guard<std::mutex> lock(active_mutex);
  active_impl = impl;
  return std::shared_ptr<BackwardTimeline>(new BackwardTimeline(impl));
}

void BackwardTimeline::start() { impl_->record("head"); }

void BackwardTimeline::finish() {
  impl_->record("");  // the end
  {
    std::lock_guard<std::mutex> lock(active_mutex);
    if (active_impl == impl_) active_impl.reset();
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto& marks = impl_->marks;
  if (marks.back().second.event) marks.back().second.event->synchronize();
  Json::object_t segments;
  for (size_t i = 0; i + 1 < marks.size(); ++i) {
    const double ms = Impl::elapsed_ms(marks[i].second, marks[i + 1].second);
    Json& slot = segments[marks[i].first];
    slot = Json((slot.is_null() ? 0.0 : json_double(slot, "segment")) + ms);
  }
  std::map<std::string, double> node_ms;
  for (const Impl::NodeSpan& span : impl_->node_spans) node_ms[span.node] += Impl::elapsed_ms(span.begin, span.end);
  Json::object_t nodes;
  for (const auto& [name, ms] : node_ms) nodes[name] = Json(ms);
  const Json line = {{"device", impl_->device.str()},
                     {"total_ms", Impl::elapsed_ms(marks.front().second, marks.back().second)},
                     {"segments", std::move(segments)},
                     {"nodes", std::move(nodes)}};
  std::ofstream out(impl_->path, std::ios::app);
  out << line.dump() << "\n";
  RLLOOP_CHECK(out.good(), Io, "RLLOOP_BACKWARD_TIMELINE: cannot append to " << impl_->path);
}

void BackwardTimeline::mark(const at::Tensor& t, const char* segment) {
  if (!timeline_path() || !t.requires_grad()) return;
  std::shared_ptr<Impl> impl = active();
  if (!impl) return;
  std::string label(segment);
  t.register_hook([impl, label](const at::Tensor&) { impl->record(label); });
}

BackwardNodeTimer::BackwardNodeTimer(const char* node) : impl_(timeline_path() ? active() : nullptr), node_(node) {
  if (impl_) begin_ = std::make_unique<TimelineStamp>(impl_->stamp());
}

BackwardNodeTimer::~BackwardNodeTimer() {
  if (!impl_) return;
  TimelineStamp end = impl_->stamp();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->node_spans.push_back({node_, std::move(*begin_), std::move(end)});
}

}  // namespace rlloop
