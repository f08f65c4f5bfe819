#include "controller/mitigation/plan_measurement.h"

#include <algorithm>

#include "common/stats.h"

namespace falcon::controller::mitigation {

PlanMeasurement::PlanMeasurement(int window, double no_help_fraction)
    : window_(std::max(1, window)), no_help_fraction_(no_help_fraction), needed_(window_) {}

void PlanMeasurement::Restart(int64_t from) {
  from_ = from;
  samples_ns_.clear();
  needed_ = window_;
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
  // Until judged, the plan's first samples are kept for a longer window; then its latest.
  const size_t keep = static_cast<size_t>(judged_ ? window_ : kLongerWindows * window_);
  if (samples_ns_.size() > keep) {
    samples_ns_.erase(samples_ns_.begin(), samples_ns_.end() - static_cast<std::ptrdiff_t>(keep));
  }
  return absl::Nanoseconds(common::Median(Latest(window_)));
}

absl::Span<const int64_t> PlanMeasurement::Latest(int n) const {
  return absl::MakeConstSpan(samples_ns_)
      .last(std::min(samples_ns_.size(), static_cast<size_t>(n)));
}

std::optional<PlanMeasurement::Judgement> PlanMeasurement::Judge(absl::Duration slow,
                                                                 double outside_load) {
  if (!Due()) return std::nullopt;
  Judgement j;
  j.iterations = needed_;
  j.median = absl::Nanoseconds(common::Median(Latest(needed_)));
  j.judged = outside_load > 0 ? j.median / outside_load : j.median;
  j.helped = j.judged < slow * no_help_fraction_;
  if (!j.helped && needed_ == window_ && j.judged < slow) {
    needed_ = kLongerWindows * window_;
    j.final = false;
    return j;
  }
  judged_ = true;
  return j;
}

}  // namespace falcon::controller::mitigation
