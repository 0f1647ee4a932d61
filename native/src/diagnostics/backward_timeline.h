// Where a backward's time goes, by model segment, without a tracer: Kineto windows that span a CUDA backward crash
// the process (libtorch's autograd device threads, see diagnostics/profiler.h), so the backward had no profile. Opt-in with
// RLLOOP_BACKWARD_TIMELINE=<file.jsonl>; free otherwise.
//
// The forward marks the ends of segments on graph tensors (mark: "this tensor is what segment L produced"). In
// backward, a mark's gradient hook fires once that gradient is complete — once the backward of everything after the
// mark has run — and records an event on the current stream there; the backward of segment L then runs until the
// next event. So consecutive events bracket one segment, and the first interval is the head (final norm, lm_head,
// log-softmax, loss). Custom backward nodes also time themselves (BackwardNodeTimer): nested "of which" figures.
// Marks go on the residual stream only, where the graph is a chain, so no other branch runs inside an interval.
// Meant for runs without recompute (a checkpointed layer's recompute lands in the segment before it). One backward
// at a time per process; one JSON line per backward call:
//   {"device": "cuda:0", "total_ms": …, "segments": {"head": …, "mlp": …, "layer.linear_attention": …},
//    "nodes": {"gdn.delta_rule": …, …}}   (times summed over layers)
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>

namespace rlloop {

struct TimelineStamp;

class BackwardTimeline {
 public:
  // Starts the timeline of one backward (forward included, for the marks) when RLLOOP_BACKWARD_TIMELINE is set;
  // null otherwise. Only one is active at a time.
  static std::shared_ptr<BackwardTimeline> begin(const at::Device& device);
  // Records where the backward starts (just before loss.backward()).
  void start();
  // After backward: waits for the device, appends the JSON line, deactivates.
  void finish();

  // During the forward: hooks `t`'s gradient when a timeline is active and t is part of the graph.
  static void mark(const at::Tensor& t, const char* segment);

  struct Impl;

 private:
  explicit BackwardTimeline(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// Times one custom backward node (its scope) into the active timeline's "nodes"; nothing when none is active.
class BackwardNodeTimer {
 public:
  explicit BackwardNodeTimer(const char* node);
  ~BackwardNodeTimer();
  BackwardNodeTimer(const BackwardNodeTimer&) = delete;
  BackwardNodeTimer& operator=(const BackwardNodeTimer&) = delete;

 private:
  std::shared_ptr<BackwardTimeline::Impl> impl_;
  const char* node_;
  std::unique_ptr<TimelineStamp> begin_;
};

}  // namespace rlloop
