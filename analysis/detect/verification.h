// Verification of change points (docs/algorithms.md#verification): BOCD alone flags many harmless
// level shifts (GC, allocator misses, uneven sequences), so a change point is kept only when the
// mean before and the mean after differ by at least a threshold (10% in the paper) and it lies at
// least a minimum number of observations after the previously kept one (10 in the artifact).
// Kept changes are classified as slowdown, recovery or speed-up against the healthy level.
#ifndef FALCON_ANALYSIS_DETECT_VERIFICATION_H_
#define FALCON_ANALYSIS_DETECT_VERIFICATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

enum class ChangeKind {
  kRaw,       // Not verified (BOCD's MAP segmentation as is).
  kSlowdown,  // The level rose by at least the threshold: a fail-slow onset (or it worsened).
  kRecovery,  // The level fell while slowed down.
  kSpeedup,   // The level fell while healthy; the faster level becomes the healthy one.
};

// "raw", "slowdown", "recovery", "speedup".
absl::string_view ChangeKindName(ChangeKind kind);

struct ChangePoint {
  int64_t index = 0;  // First observation of the new level, 0-based.
  ChangeKind kind = ChangeKind::kRaw;
  double ratio = 1.0;        // mean_after / mean_before.
  double probability = 0.0;  // Lagged change-point probability (bocd.h), [0, 1].
  double mean_before = 0.0;  // In the unit of the series.
  double mean_after = 0.0;
};

// Size of a level change relative to the faster (smaller) level: max / min - 1, so that a 10%
// slowdown and its recovery both measure 0.10. 0 when both are 0; infinity when only one is.
// Means must be >= 0 (times).
double RelativeChange(double mean_before, double mean_after);

// The verification test on two stretches of a series (times, >= 0, both non-empty): significant
// when the means differ by at least `min_relative_change` (RelativeChange), as in the paper, and
// the medians do too, so that a single-iteration spike (a GC pause, a slow allocator call) inside
// a short stretch cannot pass for a level change.
struct LevelComparison {
  double mean_before = 0.0;
  double mean_after = 0.0;
  double median_before = 0.0;
  double median_after = 0.0;
  bool significant = false;
};
LevelComparison CompareLevels(absl::Span<const double> before, absl::Span<const double> after,
                              double min_relative_change);

// Remembers the healthy level and classifies verified changes. Not thread-safe.
class LevelTracker {
 public:
  // min_relative_change: the verification threshold; a recovery that ends within it of the
  // healthy level ends the slowdown.
  explicit LevelTracker(double min_relative_change) : threshold_(min_relative_change) {}

  // Classifies a verified change from mean_before to mean_after (both > 0) and updates the state:
  // a rise is a slowdown (the first one records mean_before as the healthy level); a fall while
  // slowed down is a recovery (complete once within the threshold of the healthy level); a fall
  // while healthy is a speed-up (the new level becomes the healthy one).
  ChangeKind Classify(double mean_before, double mean_after);

  bool in_slowdown() const { return in_slowdown_; }
  // The healthy level; 0 until the first classified change.
  double healthy_level() const { return healthy_level_; }
  void set_min_relative_change(double threshold) { threshold_ = threshold; }

 private:
  double threshold_;
  bool in_slowdown_ = false;
  double healthy_level_ = 0.0;
};

struct VerificationOptions {
  // Keep a change point when RelativeChange(before, after) >= this. (0, 10]. Paper: 0.10.
  double min_relative_change = 0.10;
  // A kept change point lies at least this many observations after the previous kept one; the
  // start of the series counts as kept. [1, 1000000]. Artifact: 10.
  int min_gap = 10;
  // The means use at most this many observations on each side. [1, 1000000].
  int window = 100;

  absl::Status Validate() const;
};

// Offline verification of `candidates` (ascending segment starts, e.g. Segmentation's) on the
// raw series (times, all >= 0). `probabilities` is parallel to `candidates`. For candidate c,
// CompareLevels runs on "before" = [max(last kept, c - window), c) and "after" = c up to the
// next candidate at least min_gap later (closer ones can never be kept after c), the end of the
// series, or c + window, whichever comes first. Candidates <= 0 or past the end are skipped.
// Returns the kept change points, classified, in order.
// kInvalidArgument: empty series, a negative or non-finite value (named by index), sizes that
// differ, unsorted candidates, or bad options.
absl::StatusOr<std::vector<ChangePoint>> VerifyChangePoints(absl::Span<const double> series,
                                                            absl::Span<const int64_t> candidates,
                                                            absl::Span<const double> probabilities,
                                                            const VerificationOptions& options);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_VERIFICATION_H_
