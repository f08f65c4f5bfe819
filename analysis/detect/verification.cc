#include "analysis/detect/verification.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stats.h"

namespace falcon::analysis::detect {

absl::string_view ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kRaw:
      return "raw";
    case ChangeKind::kSlowdown:
      return "slowdown";
    case ChangeKind::kRecovery:
      return "recovery";
    case ChangeKind::kSpeedup:
      return "speedup";
  }
  return "unknown";
}

double RelativeChange(double mean_before, double mean_after) {
  const double lo = std::min(mean_before, mean_after);
  const double hi = std::max(mean_before, mean_after);
  if (hi <= 0) return 0.0;
  if (lo <= 0) return std::numeric_limits<double>::infinity();
  return hi / lo - 1.0;
}

LevelComparison CompareLevels(absl::Span<const double> before, absl::Span<const double> after,
                              double min_relative_change) {
  LevelComparison out;
  if (before.empty() || after.empty()) return out;
  out.mean_before = common::Mean(before);
  out.mean_after = common::Mean(after);
  out.median_before = common::Median(before);
  out.median_after = common::Median(after);
  out.significant = RelativeChange(out.mean_before, out.mean_after) >= min_relative_change &&
                    RelativeChange(out.median_before, out.median_after) >= min_relative_change &&
                    (out.mean_after > out.mean_before) == (out.median_after > out.median_before);
  return out;
}

ChangeKind LevelTracker::Classify(double mean_before, double mean_after) {
  if (mean_after > mean_before) {
    if (!in_slowdown_) {
      in_slowdown_ = true;
      healthy_level_ = mean_before;
    }
    return ChangeKind::kSlowdown;
  }
  if (in_slowdown_) {
    if (RelativeChange(healthy_level_, mean_after) < threshold_ || mean_after < healthy_level_) {
      in_slowdown_ = false;
      healthy_level_ = std::min(healthy_level_, mean_after);
    }
    return ChangeKind::kRecovery;
  }
  healthy_level_ = mean_after;
  return ChangeKind::kSpeedup;
}

absl::Status VerificationOptions::Validate() const {
  if (!(min_relative_change > 0 && min_relative_change <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_relative_change must be in (0, 10], got ", min_relative_change));
  }
  if (min_gap < 1 || min_gap > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_gap must be in [1, 1000000], got ", min_gap));
  }
  if (window < 1 || window > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("window must be in [1, 1000000], got ", window));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChangePoint>> VerifyChangePoints(absl::Span<const double> series,
                                                            absl::Span<const int64_t> candidates,
                                                            absl::Span<const double> probabilities,
                                                            const VerificationOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (series.empty()) return absl::InvalidArgumentError("series is empty");
  for (size_t i = 0; i < series.size(); ++i) {
    if (!std::isfinite(series[i]) || series[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", i, " must be a finite time >= 0 for verification, got ", series[i]));
    }
  }
  if (candidates.size() != probabilities.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", candidates.size(), " candidates but ",
                                                   probabilities.size(), " probabilities"));
  }
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i] <= candidates[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("candidates must be strictly ascending; candidate ", i, " (", candidates[i],
                       ") follows ", candidates[i - 1]));
    }
  }
  const int64_t n = static_cast<int64_t>(series.size());
  LevelTracker tracker(options.min_relative_change);
  std::vector<ChangePoint> kept;
  int64_t last_kept = 0;
  for (size_t j = 0; j < candidates.size(); ++j) {
    const int64_t c = candidates[j];
    if (c <= 0 || c >= n) continue;
    if (c - last_kept < options.min_gap) continue;
    int64_t after_end = std::min(n, c + options.window);
    for (size_t k = j + 1; k < candidates.size(); ++k) {
      if (candidates[k] >= c + options.min_gap) {
        after_end = std::min(after_end, candidates[k]);
        break;
      }
    }
    const int64_t before_begin = std::max(last_kept, c - options.window);
    const LevelComparison cmp =
        CompareLevels(series.subspan(before_begin, c - before_begin),
                      series.subspan(c, after_end - c), options.min_relative_change);
    if (!cmp.significant) continue;
    ChangePoint cp;
    cp.index = c;
    cp.mean_before = cmp.mean_before;
    cp.mean_after = cmp.mean_after;
    cp.ratio = cmp.mean_before > 0 ? cmp.mean_after / cmp.mean_before
                                   : std::numeric_limits<double>::infinity();
    cp.probability = probabilities[j];
    cp.kind = tracker.Classify(cmp.mean_before, cmp.mean_after);
    kept.push_back(cp);
    last_kept = c;
  }
  return kept;
}

}  // namespace falcon::analysis::detect
