#include "collective/fault/compute_slowdown.h"

namespace falcon::collective::fault {

ComputeSlowdown::ComputeSlowdown(const std::vector<ComputeFault>& faults, int rank,
                                 Sleeper* sleeper)
    : sleeper_(sleeper) {
  for (const ComputeFault& f : faults) {
    if (f.rank == rank) faults_.push_back(f);
  }
}

double ComputeSlowdown::FactorAt(int64_t iteration) const {
  double factor = 1.0;
  for (const ComputeFault& f : faults_) {
    if (f.window.Contains(iteration)) factor *= f.factor;
  }
  return factor;
}

absl::Duration ComputeSlowdown::ExtraFor(int64_t iteration, absl::Duration compute) const {
  if (compute <= absl::ZeroDuration()) return absl::ZeroDuration();
  const double factor = FactorAt(iteration);
  if (factor <= 1.0) return absl::ZeroDuration();
  return compute * (factor - 1.0);
}

absl::Duration ComputeSlowdown::Apply(int64_t iteration, absl::Duration compute) const {
  const absl::Duration extra = ExtraFor(iteration, compute);
  if (extra > absl::ZeroDuration()) sleeper_->Spend(extra);
  return extra;
}

}  // namespace falcon::collective::fault
