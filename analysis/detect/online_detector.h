// Online fail-slow detection on one iteration-time series (docs/algorithms.md#online-detector):
// BOCD on the standardized series, a change point proposed when the lagged change-point probability
// reaches a threshold (0.9 in the paper), then verified (verification.h) and classified. Events
// carry the iteration of the change and the iteration at which it was decided, so the detection
// delay is part of the result. The controller keeps one detector per rank and one per job
// (DetectorBank).
#ifndef FALCON_ANALYSIS_DETECT_ONLINE_DETECTOR_H_
#define FALCON_ANALYSIS_DETECT_ONLINE_DETECTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/detect/bocd.h"
#include "analysis/detect/verification.h"

namespace falcon::analysis::detect {

// The thresholds an operator may change while a job runs (proto Settings). Defaults as there.
struct DetectorThresholds {
  double verification_ratio = 0.10;  // Min relative level change, (0, 10].
  // Min observations between kept changes, [1, 10000]. A change proposed nearer the last kept
  // one is verified at the first observation the gap allows.
  int min_gap = 10;
  double hazard = 1.0 / 250.0;      // BOCD constant hazard, (0, 1).
  double change_probability = 0.9;  // Lagged change-point probability to propose, (0, 1).

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

struct OnlineDetectorOptions {
  // Latest observations whose median must still sit at the new level when a change is decided.
  static constexpr int kPersistence = 3;

  DetectorThresholds thresholds;
  // BOCD model on the standardized series (healthy level 0, unit variance). A weak prior on the
  // mean of a new segment (k = 0.1, not ocp's 1) lets a new level show within a few observations:
  // a 10% step in 3% noise is proposed within 5 iterations in about 98% of trials, against 92%.
  NormalGammaPrior prior = {0.0, 0.1, 1.0, 1.0};
  double prune_threshold = 1e-4;  // bocd.h, [0, 1).
  int max_hypotheses = 50;        // bocd.h, >= 2.
  // The change-point probability counts segments that began within the last `lag` observations;
  // a change older than that is no longer proposed. [1, 1000].
  int lag = 10;
  // Observations at the new level needed before deciding, [1, lag]. The latest
  // min(kPersistence, min_after) of them must still sit at the new level (their median differs
  // from the median before by the verification ratio, and lies nearer the median after than the
  // median before), so a burst of up to min_after - 2 observations is never a change: with 5, a
  // change is decided at its 5th iteration at the earliest (the paper reacts within 2-3) and a
  // burst of 3 iterations (a rank preempted by the OS, measured on a loaded 2-core machine) is not
  // one; 4 lets such a 3-iteration burst pass, 3 lets two-sample spikes of noisy real workers
  // (Alibaba job 1) pass (docs/algorithms.md#online-detector).
  int min_after = 5;
  // Observations before the change used by verification, [1, 100000].
  int window = 100;
  // A proposed change whose verification failed (its stretch after measured just under the
  // verification ratio, as a 12% step in autocorrelated noise does now and then within `lag`
  // observations) is verified again at each later observation, on the longer stretch after it,
  // until `recheck` observations follow the latest failed proposal. Each time the start is placed
  // again, at the least-squares split of the stretch from `lag` before the earliest failed
  // proposal (at most `recheck` old), at least `min_gap` after the last kept change: a blip
  // proposed just before a real change moves to the change. The persistence test above applies as
  // on the first try, so a burst that is over is still no change, and the stretch after must be
  // one level (its two halves' medians within half the ratio of each other). 0 (or any value up
  // to min_after, which a proposal's stretch already has): never again (the paper, and the
  // default: on the noisy workers of Alibaba job 1, 60 also verifies a x1.10 wander of two ranks
  // as a slowdown). [0, 10000]. (docs/algorithms.md#online-detector)
  int recheck = 0;
  // The first `warmup` observations of a settled series set the standardization (median,
  // 1.4826 x MAD) and are then fed to BOCD; no event is decided before. Settled: the median of
  // each quarter of the warm-up lies within the verification ratio of its median. Until it does (a
  // job's first iterations are slow: compilation, caches, connection set-up), its older half is
  // dropped and the warm-up goes on, up to `max_warmup` observations, after which the latest
  // `warmup` standardize anyway. (Measured: a netns run's first 17 of 20 iterations at x1.3-2 of
  // its steady 0.31 s set a deviation 8x its noise, and a later x1.35 step was never proposed.)
  // Dropped observations are not part of any later verification stretch. [2, 100000].
  int warmup = 20;
  // [warmup, 1000000].
  int max_warmup = 200;
  // The standardizing deviation is at least this fraction of the warm-up median, so a series with
  // almost no jitter does not turn 1% wobbles into many-sigma events. [0, 1].
  double min_relative_scale = 0.01;

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

struct DetectorEvent {
  ChangeKind kind = ChangeKind::kSlowdown;  // kSlowdown (onset), kRecovery or kSpeedup.
  int64_t iteration = 0;                    // Iteration of the first observation at the new level.
  int64_t decided_at = 0;                   // Iteration whose observation completed the decision.
  // Iteration of the first observation of the stretch before the change that verification
  // compared with [iteration, decided_at] (at most `window` observations, none before the
  // previous kept change; for a change placed at `min_gap`, the stretch ends at the proposed
  // start, a few observations before `iteration`).
  int64_t before_iteration = 0;
  // Iteration just past that stretch: `iteration`, except for a change placed at `min_gap`, where
  // it is the proposed start (the observations from there to `iteration` are on neither side).
  // 0 in an event made elsewhere: `iteration`.
  int64_t before_end_iteration = 0;
  double ratio = 1.0;  // mean_after / mean_before.
  // Lagged change-point probability when the change was proposed (its latest proposal).
  double probability = 0;
  // Means of the verified stretches, in the unit of the values added (seconds for Duration).
  double mean_before = 0;
  double mean_after = 0;
  // The latest min(kPersistence, min_after) observations of the new level at the decision,
  // oldest first (the level that still held when the change was decided).
  std::vector<double> latest;
};

// One series. Not thread-safe (one caller at a time); movable.
class OnlineDetector {
 public:
  // kInvalidArgument for bad options.
  static absl::StatusOr<OnlineDetector> Create(const OnlineDetectorOptions& options);

  // Adds the time of `iteration`. Iterations must increase strictly (gaps are allowed). Returns
  // an event when this observation completes a verified change.
  // kInvalidArgument: negative or non-finite time, or an iteration not above the previous one
  // (the message names both). State is unchanged on error.
  absl::StatusOr<std::optional<DetectorEvent>> Add(int64_t iteration, absl::Duration time);
  // The same for a unitless value >= 0 (e.g. normalized iteration times); events keep the unit.
  absl::StatusOr<std::optional<DetectorEvent>> AddValue(int64_t iteration, double value);

  // Applies new thresholds from the next observation on. kInvalidArgument when out of range.
  absl::Status SetThresholds(const DetectorThresholds& thresholds);
  const OnlineDetectorOptions& options() const { return options_; }

  int64_t observations() const { return observations_; }
  bool warmed_up() const { return warmed_up_; }
  // True between a slowdown event and the recovery that ends it.
  bool in_slowdown() const { return levels_.in_slowdown(); }
  // The healthy level (unit of the values); 0 until the first event.
  double healthy_level() const { return levels_.healthy_level(); }
  // The current lagged change-point probability (0 during warm-up).
  double change_probability() const;
  size_t MemoryBytes() const;

 private:
  OnlineDetector(const OnlineDetectorOptions& options, Bocd bocd);
  std::optional<DetectorEvent> Decide();
  // Verification of the change starting at observation index `c` on [c, observations_), with the
  // persistence test; the event when it passes (it is then the last kept change). `again`: a
  // recheck, which also needs the two halves of the stretch after within half the ratio of each
  // other. The stretch before ends at `before_end` (<= c; -1: at c).
  std::optional<DetectorEvent> Verify(int64_t c, double probability, bool again,
                                      int64_t before_end = -1);
  // The observation index k in [lo, hi] that best splits [from, observations_) into two levels
  // (least squares: the largest (mean after k - mean before)^2 x n1 n2 / (n1 + n2)); -1 when the
  // range is empty. Needs from < lo.
  int64_t BestSplit(int64_t from, int64_t lo, int64_t hi) const;
  // Whether a full warm-up is settled: the median of each of its quarters within the
  // verification ratio of its median.
  bool Settled(const std::vector<double>& values) const;
  // Value and iteration of observation `index` (must be within the ring).
  double ValueAt(int64_t index) const { return ring_value_[index % ring_value_.size()]; }
  int64_t IterationAt(int64_t index) const { return ring_iteration_[index % ring_value_.size()]; }

  OnlineDetectorOptions options_;
  Bocd bocd_;
  LevelTracker levels_;
  int64_t observations_ = 0;
  int64_t last_iteration_ = 0;
  // Observation index of the last kept change (the first standardized observation before one).
  int64_t last_kept_ = 0;
  bool warmed_up_ = false;
  // Observation index of BOCD's first observation (the observations before are a warm-up's
  // unsettled start).
  int64_t bocd_offset_ = 0;
  double center_ = 0.0;
  double scale_ = 1.0;
  std::vector<double> warmup_values_;
  // Proposals that failed verification and are verified again (options_.recheck): the earliest
  // and latest start as observation indices (-1: none) and the latest change-point probability.
  int64_t recheck_first_ = -1;
  int64_t recheck_last_ = -1;
  double recheck_probability_ = 0;
  // The last window + lag + recheck + 1 observations.
  std::vector<double> ring_value_;
  std::vector<int64_t> ring_iteration_;
  std::vector<double> before_, after_;  // Scratch for verification.
};

// Which series a detector watches: one rank of a job, or the job as a whole (rank = kJobSeries).
struct SeriesKey {
  static constexpr int64_t kJobSeries = -1;
  std::string job;
  int64_t rank = kJobSeries;

  template <typename H>
  friend H AbslHashValue(H h, const SeriesKey& k) {
    return H::combine(std::move(h), k.job, k.rank);
  }
  friend bool operator==(const SeriesKey& a, const SeriesKey& b) {
    return a.rank == b.rank && a.job == b.job;
  }
};

// Detectors for many series, created on first use with the job's thresholds. Not thread-safe.
class DetectorBank {
 public:
  // kInvalidArgument for bad default options.
  static absl::StatusOr<DetectorBank> Create(const OnlineDetectorOptions& defaults);

  // OnlineDetector::Add on the key's detector (created when new).
  absl::StatusOr<std::optional<DetectorEvent>> Add(const SeriesKey& key, int64_t iteration,
                                                   absl::Duration time);
  // Thresholds for every current and future series of `job`. kInvalidArgument when out of range.
  absl::Status SetThresholds(absl::string_view job, const DetectorThresholds& thresholds);
  // The thresholds `job` uses (the defaults unless set).
  DetectorThresholds Thresholds(absl::string_view job) const;
  // Forgets one series, or every series and the thresholds of a job.
  void Remove(const SeriesKey& key) { detectors_.erase(key); }
  void RemoveJob(absl::string_view job);
  // nullptr when the key has no detector.
  const OnlineDetector* Find(const SeriesKey& key) const;
  size_t size() const { return detectors_.size(); }

 private:
  explicit DetectorBank(const OnlineDetectorOptions& defaults) : defaults_(defaults) {}

  OnlineDetectorOptions defaults_;
  absl::flat_hash_map<std::string, DetectorThresholds> job_thresholds_;
  absl::flat_hash_map<SeriesKey, OnlineDetector> detectors_;
};

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_ONLINE_DETECTOR_H_
