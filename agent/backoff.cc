#include "agent/backoff.h"

#include <algorithm>
#include <cmath>

namespace falcon::agent {

absl::Status Backoff::Validate(const Options& options) {
  if (options.initial <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("backoff_initial: must be > 0");
  }
  if (options.max < options.initial) {
    return absl::InvalidArgumentError("backoff_max: must be >= backoff_initial");
  }
  if (!(options.multiplier >= 1.0)) {
    return absl::InvalidArgumentError("backoff_multiplier: must be >= 1");
  }
  if (!(options.jitter >= 0.0 && options.jitter < 1.0)) {
    return absl::InvalidArgumentError("backoff_jitter: must be in [0, 1)");
  }
  return absl::OkStatus();
}

Backoff::Backoff(Options options) : options_(options), rng_(options.seed) {}

absl::Duration Backoff::Next() {
  const double initial_s = absl::ToDoubleSeconds(options_.initial);
  const double max_s = absl::ToDoubleSeconds(options_.max);
  // Cap the exponent so the power cannot overflow; the cap is reached long before.
  const double grown = initial_s * std::pow(options_.multiplier, std::min(attempt_, 64));
  const double base_s = std::min(grown, max_s);
  ++attempt_;
  std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0 + options_.jitter);
  const double factor = options_.jitter > 0 ? spread(rng_) : 1.0;
  return absl::Seconds(base_s * factor);
}

}  // namespace falcon::agent
