#include "collective/fault/link_shaper.h"

#include <algorithm>

namespace falcon::collective::fault {

LinkShaper::LinkShaper(std::vector<LinkFault> faults, Sleeper* sleeper)
    : faults_(std::move(faults)), sleeper_(sleeper) {}

bool LinkShaper::HasLinksFrom(int src) const {
  return std::any_of(faults_.begin(), faults_.end(),
                     [src](const LinkFault& f) { return f.src == src; });
}

absl::Duration LinkShaper::DelayFor(int src, int dst, uint64_t bytes, int64_t iteration) const {
  if (iteration < 0) iteration = 0;
  absl::Duration delay = absl::ZeroDuration();
  double min_mbps = 0;
  for (const LinkFault& f : faults_) {
    if (f.src != src || f.dst != dst || !f.window.Contains(iteration)) continue;
    delay += f.delay;
    if (f.bandwidth_mbps > 0 && (min_mbps == 0 || f.bandwidth_mbps < min_mbps)) {
      min_mbps = f.bandwidth_mbps;
    }
  }
  if (min_mbps > 0 && bytes > 0) {
    delay += absl::Seconds(static_cast<double>(bytes) * 8.0 / (min_mbps * 1e6));
  }
  return delay;
}

absl::Duration LinkShaper::Apply(int src, int dst, uint64_t bytes, int64_t iteration) const {
  const absl::Duration d = DelayFor(src, dst, bytes, iteration);
  if (d > absl::ZeroDuration()) sleeper_->Spend(d);
  return d;
}

absl::Duration LinkShaper::ApplySteps(int src, int dst, uint64_t bytes_per_step, int steps,
                                      int64_t iteration) const {
  if (steps <= 0) return absl::ZeroDuration();
  const absl::Duration d = DelayFor(src, dst, bytes_per_step, iteration) * steps;
  if (d > absl::ZeroDuration()) sleeper_->Spend(d);
  return d;
}

}  // namespace falcon::collective::fault
