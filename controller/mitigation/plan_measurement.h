// The job's iteration time under the plan in force (S2 or S3): the median of the last `window`
// job iterations after the plan's effective iteration (Event.mitigated_iteration_time_ns). The
// plan is judged once, when the window first fills: it did not help when the median is at least
// `no_help_fraction` of the event's slow iteration time. A new plan restarts the measurement.
// See docs/algorithms.md#strategies. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_
#define FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace falcon::controller::mitigation {

class PlanMeasurement {
 public:
  // `window` >= 1 iterations; `no_help_fraction` in (0, 1].
  PlanMeasurement(int window, double no_help_fraction);

  // A plan took effect at iteration `from`: measure from the next one on.
  void Restart(int64_t from);
  // The effective iteration of the plan measured; -1 when none.
  int64_t from() const { return from_; }

  // Adds job iteration `iteration` when it is after from(); returns the median so far, or
  // nullopt when the iteration does not count (nothing measured, or not after from()).
  std::optional<absl::Duration> Add(int64_t iteration, absl::Duration iteration_time);

  struct Judgement {
    absl::Duration median;
    bool helped = true;
  };
  // Once per plan, when the window is full: whether the median beat `slow` by the fraction.
  std::optional<Judgement> Judge(absl::Duration slow);

 private:
  int window_;
  double no_help_fraction_;
  int64_t from_ = -1;
  std::vector<int64_t> samples_ns_;
  bool judged_ = false;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_PLAN_MEASUREMENT_H_
