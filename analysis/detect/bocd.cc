#include "analysis/detect/bocd.h"

#include <math.h>  // lgamma_r: the reentrant lgamma (std::lgamma writes the global signgam).

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace falcon::analysis::detect {
namespace {

constexpr double kHalfLogPi = 0.5723649429247001;  // 0.5 * log(pi)
// Merging drops the front of the arrays; they are moved back after this many drops.
constexpr size_t kCompactAfter = 16;

bool IsFinite(double x) { return std::isfinite(x); }

double LogAddExp(double a, double b) {
  const double hi = std::max(a, b);
  const double lo = std::min(a, b);
  if (hi == -std::numeric_limits<double>::infinity()) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

double LGamma(double x) {
  int sign = 0;
  return lgamma_r(x, &sign);
}

}  // namespace

absl::Status BocdOptions::Validate() const {
  if (!IsFinite(prior.m)) return absl::InvalidArgumentError("prior.m must be finite");
  if (!(prior.k > 0) || !IsFinite(prior.k)) {
    return absl::InvalidArgumentError(absl::StrCat("prior.k must be > 0, got ", prior.k));
  }
  if (!(prior.a > 0) || !IsFinite(prior.a)) {
    return absl::InvalidArgumentError(absl::StrCat("prior.a must be > 0, got ", prior.a));
  }
  if (!(prior.b > 0) || !IsFinite(prior.b)) {
    return absl::InvalidArgumentError(absl::StrCat("prior.b must be > 0, got ", prior.b));
  }
  if (!(hazard > 0 && hazard < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("hazard must be in (0, 1), got ", hazard));
  }
  if (!(prune_threshold >= 0 && prune_threshold < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prune_threshold must be in [0, 1), got ", prune_threshold));
  }
  if (max_hypotheses < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_hypotheses must be >= 2, got ", max_hypotheses));
  }
  return absl::OkStatus();
}

Bocd::Bocd(const BocdOptions& options) : options_(options) {
  log_hazard_ = std::log(options_.hazard);
  log_one_minus_hazard_ = std::log1p(-options_.hazard);
  // Predictive constants for run lengths below the table size come from the table; longer runs
  // (rare: only hypotheses that survived pruning far past the cap) call lgamma directly.
  const int table = std::min(1024, std::max(64, options_.max_hypotheses + 2));
  gamma_ratio_.resize(table);
  growth_.resize(table);
  for (int n = 0; n < table; ++n) {
    gamma_ratio_[n] = ComputeGammaRatio(n);
    growth_[n] = ComputeGrowthStep(n);
  }
  log_prune_ = options_.prune_threshold > 0 ? std::log(options_.prune_threshold)
                                            : -std::numeric_limits<double>::infinity();
  const double k = options_.prior.k;
  prior_log_v_ = std::log(2.0 * options_.prior.b * (k + 1.0) / k);
  const size_t cap =
      static_cast<size_t>(std::min(options_.max_hypotheses, 256)) + kCompactAfter + 2;
  for (auto* v : {&mu_, &log_v_, &inv_v_, &log_p_, &scratch_}) v->reserve(cap);
  run_.reserve(cap);
  // Before any data: one hypothesis, r = 0, with the prior's statistics.
  PushPrior(0.0);
  if (options_.track_map) {
    // ocp's bookkeeping: start index 1 (before the data) and 2 have score 0; start 2's best
    // preceding segmentation is the one starting at 1.
    map_score_ = {0.0, 0.0};
    map_parent_ = {-1, 1};
  }
}

absl::StatusOr<Bocd> Bocd::Create(const BocdOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return Bocd(options);
}

// The model. A hypothesis with n observations has kappa = k + n, alpha = a + n/2 and a Student-t
// predictive with nu = 2 alpha and scale^2 = beta (kappa + 1) / (alpha kappa). With
// V = nu scale^2 = 2 beta (kappa + 1) / kappa and u = (x - mu)^2 / V:
//   log t(x) = G(n) - log(pi)/2 - log(V)/2 - (alpha + 1/2) log(1 + u),
//   G(n) = lgamma(alpha + 1/2) - lgamma(alpha).
// The conjugate update gives beta' = beta + kappa (x - mu)^2 / (2 (kappa + 1)) = beta (1 + u), so
//   log V' = log V + log(1 + u) + D(n),  D(n) = log((kappa + 2) kappa / (kappa + 1)^2),
// and one logarithm per hypothesis serves both the predictive and the update. G(n), D(n) and the
// other per-n factors of the update come from tables for short runs.
double Bocd::ComputeGammaRatio(int64_t n) const {
  const double a = options_.prior.a + 0.5 * static_cast<double>(n);
  if (a < 32) return LGamma(a + 0.5) - LGamma(a);
  // Asymptotic series (error about 1e-13 at a = 32, less above); cheaper than two lgamma calls,
  // used every update by the long merged run.
  const double inv = 1.0 / a;
  const double inv2 = inv * inv;
  return 0.5 * std::log(a) - inv / 8.0 + inv * inv2 / 192.0 - inv * inv2 * inv2 / 640.0;
}

Bocd::GrowthStep Bocd::ComputeGrowthStep(int64_t n) const {
  const double kappa = options_.prior.k + static_cast<double>(n);
  GrowthStep g;
  g.inv_kappa_plus_1 = 1.0 / (kappa + 1.0);
  g.log_v_step = std::log1p(-1.0 / ((kappa + 1.0) * (kappa + 1.0)));
  g.inv_v_factor = (kappa + 1.0) * (kappa + 1.0) / ((kappa + 2.0) * kappa);
  return g;
}

void Bocd::PushPrior(double log_p) {
  run_.push_back(0);
  mu_.push_back(options_.prior.m);
  log_v_.push_back(prior_log_v_);
  inv_v_.push_back(std::exp(-prior_log_v_));
  log_p_.push_back(log_p);
}

absl::Status Bocd::SetHazard(double hazard) {
  if (!(hazard > 0 && hazard < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("hazard must be in (0, 1), got ", hazard));
  }
  options_.hazard = hazard;
  log_hazard_ = std::log(hazard);
  log_one_minus_hazard_ = std::log1p(-hazard);
  return absl::OkStatus();
}

absl::Status Bocd::Update(double x) {
  if (!IsFinite(x)) {
    return absl::InvalidArgumentError(
        absl::StrCat("observation ", count_, " is not a finite number: ", x));
  }
  const size_t begin = begin_;
  const size_t end = run_.size();
  std::vector<double>& w = scratch_;
  w.resize(end);
  // 1. Predictive log-likelihood of x under each hypothesis, joint with its posterior; then
  //    grow the hypothesis by x (conjugate update).
  double w_max = -std::numeric_limits<double>::infinity();
  size_t best = begin;
  const double a0 = options_.prior.a;
  const int64_t table = static_cast<int64_t>(gamma_ratio_.size());
  for (size_t i = begin; i < end; ++i) {
    const int64_t n = run_[i];
    const double d = x - mu_[i];
    const double u = d * d * inv_v_[i];
    const double log1pu = std::log(1.0 + u);
    const bool tabled = n < table;
    const double gamma_ratio = tabled ? gamma_ratio_[n] : ComputeGammaRatio(n);
    w[i] = log_p_[i] + gamma_ratio - kHalfLogPi - 0.5 * log_v_[i] -
           (a0 + 0.5 * static_cast<double>(n) + 0.5) * log1pu;
    if (w[i] > w_max) {
      w_max = w[i];
      best = i;
    }
    const GrowthStep g = tabled ? growth_[n] : ComputeGrowthStep(n);
    mu_[i] += d * g.inv_kappa_plus_1;
    log_v_[i] += log1pu + g.log_v_step;
    inv_v_[i] *= g.inv_v_factor / (1.0 + u);
    run_[i] = n + 1;
  }
  // 2. Evidence: log sum_i exp(w_i). Growth keeps (1 - H) of each term and the change point
  //    collects H of the total, so after normalizing P(r = 0) = H.
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += std::exp(w[i] - w_max);
  const double log_growth = log_one_minus_hazard_ - (w_max + std::log(sum));
  ++count_;
  // 3. Normalize, take the MAP step (ocp's findCPprobs: the segment starting at s = n + 1 - r,
  //    1-based, scores log P(r) + the best score of segmentations before s; ties go to the
  //    longest run, as ocp's which.max over runs ordered longest first), and drop hypotheses
  //    below the pruning threshold, except the most probable one.
  const bool map = options_.track_map;
  const int64_t n1 = count_ + 1;
  double best_score = -std::numeric_limits<double>::infinity();
  int64_t best_start = 1;
  size_t out = begin;
  for (size_t i = begin; i < end; ++i) {
    const double lp = w[i] + log_growth;
    if (map) {
      const int64_t start = n1 - run_[i];
      const double score = lp + map_score_[start - 1];
      if (score > best_score) {
        best_score = score;
        best_start = start;
      }
    }
    if (lp < log_prune_ && i != best) continue;
    if (out != i) MoveHypothesis(i, out);
    log_p_[out] = lp;
    ++out;
  }
  for (auto* v : {&mu_, &log_v_, &inv_v_, &log_p_}) v->resize(out);
  run_.resize(out);
  // The new r = 0 hypothesis (prior statistics), appended: the arrays are in descending run order.
  PushPrior(log_hazard_);
  if (map) {
    const double score = log_hazard_ + map_score_[n1 - 1];
    if (score > best_score) {
      best_score = score;
      best_start = n1;
    }
    map_score_.push_back(best_score);
    map_parent_.push_back(best_start);
  }
  // 4. The cap: merge the two longest runs until at most max_hypotheses remain.
  const size_t cap = static_cast<size_t>(options_.max_hypotheses);
  while (run_.size() - begin_ > cap) {
    const size_t a = begin_, b = begin_ + 1;
    const double merged = LogAddExp(log_p_[a], log_p_[b]);
    if (log_p_[a] > log_p_[b]) MoveHypothesis(a, b);
    log_p_[b] = merged;
    ++begin_;
  }
  // The live range drifts right as runs are merged; move it back now and then (amortized O(1)).
  if (begin_ >= kCompactAfter) {
    const size_t live = run_.size() - begin_;
    for (size_t i = 0; i < live; ++i) MoveHypothesis(begin_ + i, i);
    for (auto* v : {&mu_, &log_v_, &inv_v_, &log_p_}) v->resize(live);
    run_.resize(live);
    begin_ = 0;
  }
  return absl::OkStatus();
}

double Bocd::ChangeProbabilityWithin(int lag) const {
  double p = 0.0;
  // Descending run order: the short runs are at the back.
  for (size_t i = run_.size(); i-- > begin_;) {
    if (run_[i] > lag) break;
    if (run_[i] >= 1) p += std::exp(log_p_[i]);
  }
  return std::min(p, 1.0);
}

int64_t Bocd::MostProbableRecentStart(int lag) const {
  int64_t start = -1;
  double best = -std::numeric_limits<double>::infinity();
  for (size_t i = run_.size(); i-- > begin_;) {
    if (run_[i] > lag) break;
    if (run_[i] >= 1 && log_p_[i] > best) {
      best = log_p_[i];
      start = count_ - run_[i];
    }
  }
  return start;
}

absl::StatusOr<std::vector<int64_t>> Bocd::MapChangePoints() const {
  if (!options_.track_map) {
    return absl::FailedPreconditionError("MAP segmentation needs BocdOptions.track_map");
  }
  if (count_ == 0) return absl::FailedPreconditionError("no observations yet");
  std::vector<int64_t> starts;
  int64_t idx = count_ + 2;  // ocp's 1-based index of "the segment after the last observation".
  while (idx > 1) {
    const int64_t parent = map_parent_[idx - 1];
    // A start of count_ + 1 would begin after the last observation (ocp may report it when the
    // last point is an outlier); it names no observation, so it is left out.
    if (parent <= count_) starts.push_back(parent - 1);
    idx = parent;
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

std::vector<Bocd::RunLength> Bocd::Posterior() const {
  std::vector<RunLength> out;
  out.reserve(run_.size() - begin_);
  for (size_t i = run_.size(); i-- > begin_;) out.push_back({run_[i], std::exp(log_p_[i])});
  return out;
}

size_t Bocd::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  bytes += run_.capacity() * sizeof(int64_t);
  for (const auto* v : {&mu_, &log_v_, &inv_v_, &log_p_, &scratch_, &gamma_ratio_}) {
    bytes += v->capacity() * sizeof(double);
  }
  bytes += growth_.capacity() * sizeof(GrowthStep);
  bytes += map_score_.capacity() * sizeof(double) + map_parent_.capacity() * sizeof(int64_t);
  return bytes;
}

absl::Status SegmentOptions::Validate() const {
  if (absl::Status s = bocd.Validate(); !s.ok()) return s;
  if (probability_lag < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("probability_lag must be >= 1, got ", probability_lag));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ZScore(absl::Span<const double> series) {
  if (series.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("z-scoring needs at least 2 values, got ", series.size()));
  }
  double max_abs = 0.0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!IsFinite(series[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", i, " is not a finite number: ", series[i]));
    }
    max_abs = std::max(max_abs, std::fabs(series[i]));
  }
  // z-scores do not depend on the unit, but the sums below overflow for huge values (1e200
  // squared) and underflow for tiny ones (1e-300 squared). Scale by the power of two that brings
  // the largest magnitude into [0.5, 1): exact, so ordinary series give bit-identical results.
  int exponent = 0;
  if (max_abs > 0) std::frexp(max_abs, &exponent);
  std::vector<double> out(series.size());
  double mean = 0.0;
  for (size_t i = 0; i < series.size(); ++i) {
    out[i] = std::ldexp(series[i], -exponent);
    mean += out[i];
  }
  mean /= static_cast<double>(series.size());
  double ss = 0.0;
  for (double v : out) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / static_cast<double>(series.size() - 1));
  for (double& v : out) v = sd > 0 ? (v - mean) / sd : v - mean;
  return out;
}

absl::StatusOr<Segmentation> SegmentSeries(absl::Span<const double> series,
                                           const SegmentOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (series.empty()) return absl::InvalidArgumentError("series is empty");
  std::vector<double> scaled;
  if (options.zscore) {
    absl::StatusOr<std::vector<double>> z = ZScore(series);
    if (!z.ok()) return z.status();
    scaled = *std::move(z);
    series = scaled;
  } else {
    for (size_t i = 0; i < series.size(); ++i) {
      if (std::fabs(series[i]) > kMaxUnscaledObservation) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value ", i, " (", series[i],
            ") is too large for BOCD without z-scoring (|x| <= ", kMaxUnscaledObservation, ")"));
      }
    }
  }
  BocdOptions bocd_options = options.bocd;
  bocd_options.track_map = true;
  absl::StatusOr<Bocd> bocd = Bocd::Create(bocd_options);
  if (!bocd.ok()) return bocd.status();
  Segmentation out;
  out.lagged_probability.reserve(series.size());
  for (double x : series) {
    if (absl::Status s = bocd->Update(x); !s.ok()) return s;
    out.lagged_probability.push_back(bocd->ChangeProbabilityWithin(options.probability_lag));
  }
  absl::StatusOr<std::vector<int64_t>> cps = bocd->MapChangePoints();
  if (!cps.ok()) return cps.status();
  out.change_points = *std::move(cps);
  const int64_t n = static_cast<int64_t>(series.size());
  for (int64_t c : out.change_points) {
    if (c == 0) {
      out.probabilities.push_back(1.0);
      continue;
    }
    double p = 0.0;
    for (int64_t t = c; t < std::min(n, c + options.probability_lag); ++t) {
      p = std::max(p, out.lagged_probability[t]);
    }
    out.probabilities.push_back(p);
  }
  return out;
}

}  // namespace falcon::analysis::detect
