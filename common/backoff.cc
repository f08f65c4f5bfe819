#include "common/backoff.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace falcon::common {

absl::Status Backoff::Validate(const Options& options, absl::string_view field_prefix) {
  auto bad = [&](absl::string_view option, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(field_prefix, option, ": ", rule));
  };
  if (options.initial <= absl::ZeroDuration()) return bad("initial", "must be > 0");
  if (options.max < options.initial) {
    return bad("max", absl::StrCat("must be >= ", field_prefix, "initial"));
  }
  if (!(options.multiplier >= 1.0)) return bad("multiplier", "must be >= 1");
  if (!(options.jitter >= 0.0 && options.jitter < 1.0)) return bad("jitter", "must be in [0, 1)");
  return absl::OkStatus();
}

absl::Duration Backoff::Next() {
  absl::Duration d = options_.initial;
  // At most 64 growth steps: with multiplier >= 2 the cap is reached long before.
  for (int i = 0; i < std::min(attempt_, 64) && d < options_.max; ++i) d *= options_.multiplier;
  d = std::min(d, options_.max);
  if (attempt_ < INT32_MAX) ++attempt_;
  if (options_.jitter > 0) {
    std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0 + options_.jitter);
    d *= spread(rng_);
  }
  return std::min(d, options_.max);
}

}  // namespace falcon::common
