// The job's iteration time under the plan in force (S2 or S3): the median of the last `window`
// job iterations after the plan's effective iteration (Event.mitigated_iteration_time_ns). The
// plan is judged when the window first fills: it did not help when the median is at least
// `no_help_fraction` of the event's slow iteration time. A median between that fraction and the
// slow time itself is within the noise of a loaded machine, so the plan is measured on, and
// judged on the median of its first kLongerWindows x `window` iterations (seen on the netns
// cluster: an S2 plan that recovered a third of a x1.17 slowdown measured 0.289 s over 5
// iterations against 0.97 x a slow 0.298 s, and was reverted). A median at or above the slow time
// is judged at once. A new plan restarts the measurement. See docs/algorithms.md#strategies. Not
// thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_
#define FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace falcon::controller::mitigation {

class PlanMeasurement {
 public:
  // `window` >= 1 iterations; `no_help_fraction` in (0, 1].
  PlanMeasurement(int window, double no_help_fraction);

  // A plan took effect at iteration `from`: measure from the next one on.
  void Restart(int64_t from);
  // After a controller restart: the plan in force took effect at `from` and the job had reached
  // `last_iteration` when the state was lost. Measures from the next iteration on, as Restart;
  // a plan whose window had filled by `last_iteration` was judged then and is not judged again
  // (one still measured longer then counts as kept: what it measured was lost with the state).
  void Resume(int64_t from, int64_t last_iteration);
  // The effective iteration of the plan measured; -1 when none.
  int64_t from() const { return from_; }

  // Adds job iteration `iteration` when it is after from(); returns the median so far, or
  // nullopt when the iteration does not count (nothing measured, or not after from()).
  std::optional<absl::Duration> Add(int64_t iteration, absl::Duration iteration_time);

  static constexpr int kLongerWindows = 3;

  // Whether Judge judges now: the window (or the longer one, after an undecided judgement) is
  // full and this plan was not judged yet.
  bool Due() const { return !judged_ && static_cast<int>(samples_ns_.size()) >= needed_; }

  struct Judgement {
    absl::Duration median;  // Over the window judged.
    absl::Duration judged;  // median / outside_load.
    int iterations = 0;     // In the window judged.
    bool helped = true;
    // False: the median lay between the fraction of slow and slow on the first window; the plan
    // is measured on and judged again over kLongerWindows windows (`helped` means nothing yet).
    bool final = true;
  };
  // When Due(): whether the median beat `slow` by the fraction, final once per plan.
  // `outside_load` (> 0; 1: none) is how much load from outside the job changed the ranks' speed
  // since the slow level was measured (the compute per micro-batch of the ranks that are no
  // culprit, under the plan over before it): the median is divided by it first, so that a burst
  // of load on the machines during the window neither sinks a plan that helps nor keeps one that
  // does not (seen: an S2 plan measured 0.468 s against a slow 0.400 s while a burst slowed every
  // rank, reverted, and the job ran slow to the fault's end).
  std::optional<Judgement> Judge(absl::Duration slow, double outside_load = 1.0);

 private:
  // The latest min(n, size) samples.
  absl::Span<const int64_t> Latest(int n) const;

  int window_;
  double no_help_fraction_;
  int64_t from_ = -1;
  // The plan's first samples, up to kLongerWindows x window_ (then its latest).
  std::vector<int64_t> samples_ns_;
  int needed_;  // Samples Due() waits for: window_, or kLongerWindows x window_.
  bool judged_ = false;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_
