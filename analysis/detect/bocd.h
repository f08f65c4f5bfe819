// Bayesian online change-point detection (Adams & MacKay 2007, arXiv:0710.3742) with a
// Normal-Gamma conjugate model: each segment is Gaussian with unknown mean and variance, so the
// posterior predictive of the next observation under each run-length hypothesis is a Student-t.
// docs/algorithms.md#bocd (the FALCON paper names BOCD but gives no hazard, model or prior).
//
// Conventions (shared with the R package ocp 0.1.1, whose MAP segmentation this reproduces):
// - Observations are numbered 0, 1, 2, ... in the order given to Update().
// - After n observations, the run length r is the number of observations in the current segment;
//   that segment started at index n - r. r = 0 is the segment that starts with the next
//   observation, and under a constant hazard H its posterior is exactly H at every step, so it is
//   no detection signal. Use ChangeProbabilityWithin() (the lagged change-point probability) or
//   the MAP segmentation instead.
// - The recursion runs in log space. At the end of each update, hypotheses whose posterior is
//   below `prune_threshold` are dropped (never the most probable one, never r = 0), and while
//   more than `max_hypotheses` remain the two longest are merged (probabilities added, the
//   statistics of the more probable kept; the merged run keeps its true length, so it is the run
//   since the last change). Each update therefore costs O(R), R <= max_hypotheses: one log and
//   one exp per hypothesis. (ocp drops the tail of long runs instead; with the defaults of
//   TCPDBench both give the same MAP segmentation on the TCPD series tested.)
#ifndef FALCON_ANALYSIS_DETECT_BOCD_H_
#define FALCON_ANALYSIS_DETECT_BOCD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

// Normal-Gamma prior on a segment's (mean, precision). ocp's names: m, k, a, b.
struct NormalGammaPrior {
  double m = 0.0;  // Prior mean. Finite.
  double k = 1.0;  // Pseudo-observations behind m (kappa). > 0.
  double a = 1.0;  // Gamma shape of the precision (alpha). > 0.
  double b = 1.0;  // Gamma rate of the precision (beta). > 0.
};

struct BocdOptions {
  NormalGammaPrior prior;
  // Constant hazard H = 1 / (expected run length), in (0, 1). Default 1/250, the controller's
  // default (proto Settings.hazard); ocp and TCPDBench use 1/100.
  double hazard = 1.0 / 250.0;
  // Hypotheses whose posterior probability is below this are dropped before the next update,
  // in [0, 1). ocp's truncRlim default in TCPDBench: 1e-4.
  double prune_threshold = 1e-4;
  // Run-length cap R: at most this many hypotheses are kept; the longest are merged. >= 2.
  // 50 keeps an update near 1 us; online detection only needs the recent runs and the long one.
  // ocp's maxRlength (what TCPDBench ran) is 10000.
  int max_hypotheses = 50;
  // Keep the MAP segmentation (two numbers per observation: O(n) memory). Offline use.
  bool track_map = false;

  // kInvalidArgument naming the first field out of range.
  absl::Status Validate() const;
};

// One online BOCD instance for one univariate series. Not thread-safe; movable.
class Bocd {
 public:
  // kInvalidArgument when options are out of range.
  static absl::StatusOr<Bocd> Create(const BocdOptions& options);

  // Adds the next observation. kInvalidArgument when x is NaN or infinite (state unchanged).
  absl::Status Update(double x);

  // Observations seen so far.
  int64_t count() const { return count_; }

  // The lagged change-point probability: the posterior probability that the current segment
  // began within the last `lag` observations, i.e. P(1 <= r <= lag | x_0..x_{n-1}). lag >= 1.
  double ChangeProbabilityWithin(int lag) const;

  // Start index (n - r) of the most probable hypothesis with 1 <= r <= lag; -1 when none is live.
  int64_t MostProbableRecentStart(int lag) const;

  // Segment starts of the MAP segmentation over everything seen so far, ascending, 0-based,
  // always beginning with 0 (ocp's maxCPs minus one). kFailedPrecondition without track_map or
  // before the first observation.
  absl::StatusOr<std::vector<int64_t>> MapChangePoints() const;

  // Replaces the hazard from the next update on. kInvalidArgument outside (0, 1).
  absl::Status SetHazard(double hazard);

  const BocdOptions& options() const { return options_; }
  // Live run-length hypotheses (including r = 0).
  int live_hypotheses() const { return static_cast<int>(run_.size() - begin_); }
  // Heap and object bytes held now.
  size_t MemoryBytes() const;

  struct RunLength {
    int64_t length;
    double probability;
  };
  // The run-length posterior, ascending in length.
  std::vector<RunLength> Posterior() const;

 private:
  explicit Bocd(const BocdOptions& options);
  struct GrowthStep {
    double inv_kappa_plus_1;  // 1 / (kappa + 1)
    double log_v_step;        // D(n), see bocd.cc.
    double inv_v_factor;      // (kappa + 1)^2 / ((kappa + 2) kappa)
  };
  void PushPrior(double log_p);
  void MoveHypothesis(size_t from, size_t to) {
    run_[to] = run_[from];
    mu_[to] = mu_[from];
    log_v_[to] = log_v_[from];
    inv_v_[to] = inv_v_[from];
    log_p_[to] = log_p_[from];
  }
  double ComputeGammaRatio(int64_t n) const;  // G(n), see bocd.cc.
  GrowthStep ComputeGrowthStep(int64_t n) const;

  BocdOptions options_;
  double log_hazard_ = 0.0;
  double log_one_minus_hazard_ = 0.0;
  int64_t count_ = 0;
  double prior_log_v_ = 0.0;
  double log_prune_ = 0.0;
  // G(n) and the growth factors for n < size() (bocd.cc); longer runs compute them directly.
  std::vector<double> gamma_ratio_;
  std::vector<GrowthStep> growth_;

  // Hypotheses, structure of arrays, live in [begin_, size()) in descending run length (r = 0
  // last). For each: run length (= observations in the run), posterior mean, log V and 1 / V of
  // the predictive (bocd.cc), and log posterior probability.
  size_t begin_ = 0;
  std::vector<int64_t> run_;
  std::vector<double> mu_, log_v_, inv_v_, log_p_;
  // Scratch space reused across updates.
  std::vector<double> scratch_;
  std::vector<size_t> order_;

  // MAP segmentation (track_map): indexed like ocp's 1-based "start" index minus one.
  std::vector<double> map_score_;
  std::vector<int64_t> map_parent_;
};

// Offline analysis of a whole series.
struct SegmentOptions {
  BocdOptions bocd;
  // Standardize with the series mean and sample standard deviation (R's scale()) first.
  bool zscore = false;
  // Lag of the change-point probability reported per change point, >= 1.
  int probability_lag = 5;

  absl::Status Validate() const;
};

struct Segmentation {
  // MAP segment starts, ascending, 0 included.
  std::vector<int64_t> change_points;
  // Per change point: the largest lagged change-point probability while it was recent, i.e.
  // max over t in [c, c + lag - 1] of ChangeProbabilityWithin(lag) after observation t. 1 for 0.
  std::vector<double> probabilities;
  // Per observation t: ChangeProbabilityWithin(lag) after observation t.
  std::vector<double> lagged_probability;
};

// Largest magnitude SegmentSeries accepts without z-scoring: the Normal-Gamma sums of squares
// of larger values overflow. (With z-scoring any finite value is fine.)
inline constexpr double kMaxUnscaledObservation = 1e100;

// Runs BOCD with track_map over `series`. kInvalidArgument: empty series, a non-finite value
// (named by index), a value beyond ±kMaxUnscaledObservation without zscore, or bad options.
absl::StatusOr<Segmentation> SegmentSeries(absl::Span<const double> series,
                                           const SegmentOptions& options);

// (x - mean) / sd with the sample (n - 1) standard deviation. A constant series is only centered.
// Any finite magnitudes work (1e-300 or 1e300 seconds standardize like 1 s): the series is first
// scaled by a power of two, which is exact. kInvalidArgument: fewer than 2 values or a non-finite
// value.
absl::StatusOr<std::vector<double>> ZScore(absl::Span<const double> series);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_BOCD_H_
