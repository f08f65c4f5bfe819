#include "controller/mitigation/plan_measurement.h"

#include <algorithm>

#include "common/stats.h"

namespace falcon::controller::mitigation {

PlanMeasurement::PlanMeasurement(int window, double no_help_fraction)
    : window_(std::max(1, window)), no_help_fraction_(no_help_fraction) {}

void PlanMeasurement::Restart(int64_t from) {
  from_ = from;
  samples_ns_.clear();
  judged_ = false;
}

void PlanMeasurement::Resume(int64_t from, int64_t last_iteration) {
  Restart(from);
  judged_ = from >= 0 && last_iteration - from >= window_;
}

std::optional<absl::Duration> PlanMeasurement::Add(int64_t iteration,
                                                   absl::Duration iteration_time) {
  if (from_ < 0 || iteration <= from_) return std::nullopt;
  samples_ns_.push_back(absl::ToInt64Nanoseconds(iteration_time));
  if (static_cast<int>(samples_ns_.size()) > window_) samples_ns_.erase(samples_ns_.begin());
  return absl::Nanoseconds(common::Median(samples_ns_));
}

std::optional<PlanMeasurement::Judgement> PlanMeasurement::Judge(absl::Duration slow,
                                                                 double outside_load) {
  if (!Due()) return std::nullopt;
  judged_ = true;
  Judgement j;
  j.median = absl::Nanoseconds(common::Median(samples_ns_));
  j.judged = outside_load > 0 ? j.median / outside_load : j.median;
  j.helped = j.judged < slow * no_help_fraction_;
  return j;
}

}  // namespace falcon::controller::mitigation
