#include "trainer_shim/backoff.h"

#include <algorithm>

namespace falcon::shim {

absl::Status Backoff::Validate(const Options& o) {
  if (o.initial <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("backoff.initial: must be > 0");
  }
  if (o.max < o.initial) return absl::InvalidArgumentError("backoff.max: must be >= initial");
  if (!(o.multiplier >= 1.0)) return absl::InvalidArgumentError("backoff.multiplier: must be >= 1");
  if (!(o.jitter >= 0.0 && o.jitter < 1.0)) {
    return absl::InvalidArgumentError("backoff.jitter: must be in [0, 1)");
  }
  return absl::OkStatus();
}

absl::Duration Backoff::Next() {
  absl::Duration d = options_.initial;
  for (int i = 0; i < attempts_ && d < options_.max; ++i) d *= options_.multiplier;
  d = std::min(d, options_.max);
  ++attempts_;
  if (options_.jitter > 0) {
    std::uniform_real_distribution<double> dist(1.0 - options_.jitter, 1.0 + options_.jitter);
    d *= dist(rng_);
  }
  return std::min(d, options_.max);
}

}  // namespace falcon::shim
