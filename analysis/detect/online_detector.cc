#include "analysis/detect/online_detector.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

BocdOptions ToBocdOptions(const OnlineDetectorOptions& o) {
  BocdOptions b;
  b.prior = o.prior;
  b.hazard = o.thresholds.hazard;
  b.prune_threshold = o.prune_threshold;
  b.max_hypotheses = o.max_hypotheses;
  b.track_map = false;
  return b;
}

absl::Status OutOfRange(absl::string_view field, double value, absl::string_view range) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be in ", range, ", got ", value));
}

}  // namespace

absl::Status DetectorThresholds::Validate() const {
  if (!(verification_ratio > 0 && verification_ratio <= 10)) {
    return OutOfRange("verification_ratio", verification_ratio, "(0, 10]");
  }
  if (min_gap < 1 || min_gap > 10000) return OutOfRange("min_gap", min_gap, "[1, 10000]");
  if (!(hazard > 0 && hazard < 1)) return OutOfRange("hazard", hazard, "(0, 1)");
  if (!(change_probability > 0 && change_probability < 1)) {
    return OutOfRange("change_probability", change_probability, "(0, 1)");
  }
  return absl::OkStatus();
}

absl::Status OnlineDetectorOptions::Validate() const {
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;
  if (absl::Status s = ToBocdOptions(*this).Validate(); !s.ok()) return s;
  if (lag < 1 || lag > 1000) return OutOfRange("lag", lag, "[1, 1000]");
  if (min_after < 1 || min_after > lag) {
    return OutOfRange("min_after", min_after, absl::StrCat("[1, lag = ", lag, "]"));
  }
  if (window < 1 || window > 100000) return OutOfRange("window", window, "[1, 100000]");
  if (recheck < 0 || recheck > 10000) return OutOfRange("recheck", recheck, "[0, 10000]");
  if (warmup < 2 || warmup > 100000) return OutOfRange("warmup", warmup, "[2, 100000]");
  if (max_warmup < warmup || max_warmup > 1000000) {
    return OutOfRange("max_warmup", max_warmup, absl::StrCat("[warmup = ", warmup, ", 1000000]"));
  }
  if (!(min_relative_scale >= 0 && min_relative_scale <= 1)) {
    return OutOfRange("min_relative_scale", min_relative_scale, "[0, 1]");
  }
  return absl::OkStatus();
}

OnlineDetector::OnlineDetector(const OnlineDetectorOptions& options, Bocd bocd)
    : options_(options),
      bocd_(std::move(bocd)),
      levels_(options.thresholds.verification_ratio),
      ring_value_(options.window + options.lag + options.recheck + 1),
      ring_iteration_(options.window + options.lag + options.recheck + 1) {
  warmup_values_.reserve(options.warmup);
}

absl::StatusOr<OnlineDetector> OnlineDetector::Create(const OnlineDetectorOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::StatusOr<Bocd> bocd = Bocd::Create(ToBocdOptions(options));
  if (!bocd.ok()) return bocd.status();
  return OnlineDetector(options, *std::move(bocd));
}

absl::Status OnlineDetector::SetThresholds(const DetectorThresholds& thresholds) {
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;
  if (absl::Status s = bocd_.SetHazard(thresholds.hazard); !s.ok()) return s;
  options_.thresholds = thresholds;
  levels_.set_min_relative_change(thresholds.verification_ratio);
  return absl::OkStatus();
}

bool OnlineDetector::Settled(const std::vector<double>& values) const {
  const double median = common::Median(values);
  const auto all = absl::MakeConstSpan(values);
  const size_t quarter = values.size() / 4;
  for (size_t q = 0; q < 4 && quarter > 0; ++q) {
    const size_t end = q == 3 ? values.size() : (q + 1) * quarter;
    const double m = common::Median(all.subspan(q * quarter, end - q * quarter));
    if (RelativeChange(median, m) >= options_.thresholds.verification_ratio) return false;
  }
  return true;
}

absl::StatusOr<std::optional<DetectorEvent>> OnlineDetector::Add(int64_t iteration,
                                                                 absl::Duration time) {
  return AddValue(iteration, absl::ToDoubleSeconds(time));
}

absl::StatusOr<std::optional<DetectorEvent>> OnlineDetector::AddValue(int64_t iteration,
                                                                      double value) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("iteration time must be finite and >= 0; got ",
                                                   value, " at iteration ", iteration));
  }
  if (observations_ > 0 && iteration <= last_iteration_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iteration ", iteration, " does not follow the previous iteration ", last_iteration_));
  }
  const bool warming = !warmed_up_;
  double z = 0;
  if (!warming) {
    z = (value - center_) / scale_;
    if (!std::isfinite(z)) {
      return absl::InvalidArgumentError(absl::StrCat("iteration time ", value, " at iteration ",
                                                     iteration, " overflows the standardization"));
    }
  }
  const size_t slot = static_cast<size_t>(observations_) % ring_value_.size();
  ring_value_[slot] = value;
  ring_iteration_[slot] = iteration;
  last_iteration_ = iteration;
  ++observations_;
  if (warming) {
    warmup_values_.push_back(value);
    if (warmup_values_.size() < static_cast<size_t>(options_.warmup)) return std::nullopt;
    // Still settling (docs/algorithms.md#online-detector): drop the older half and go on.
    if (observations_ < options_.max_warmup && !Settled(warmup_values_)) {
      const size_t half = warmup_values_.size() / 2;
      warmup_values_.erase(warmup_values_.begin(), warmup_values_.begin() + half);
      return std::nullopt;
    }
    // Standardize robustly with the warm-up's median and MAD (a slow iteration or two would
    // inflate a sample deviation), then replay it into BOCD.
    const double median = common::Median(warmup_values_);
    center_ = median;
    scale_ = std::max(common::kMadToSigma * common::Mad(warmup_values_),
                      options_.min_relative_scale * std::abs(median));
    if (!(scale_ > 0)) scale_ = 1.0;
    for (double v : warmup_values_) {
      absl::Status s = bocd_.Update((v - center_) / scale_);
      if (!s.ok()) return s;  // Unreachable: warm-up values are finite.
    }
    bocd_offset_ = observations_ - static_cast<int64_t>(warmup_values_.size());
    last_kept_ = bocd_offset_;
    warmed_up_ = true;
    warmup_values_.clear();
    warmup_values_.shrink_to_fit();
    return std::nullopt;
  }
  if (absl::Status s = bocd_.Update(z); !s.ok()) return s;
  return Decide();
}

std::optional<DetectorEvent> OnlineDetector::Decide() {
  const DetectorThresholds& th = options_.thresholds;
  const int64_t n = observations_;
  // Proposals that failed before are tried until `recheck` observations follow the latest.
  if (recheck_first_ >= 0 && n - recheck_last_ > options_.recheck) recheck_first_ = -1;
  const double q = bocd_.ChangeProbabilityWithin(options_.lag);
  if (q >= th.change_probability) {
    const int64_t start = bocd_.MostProbableRecentStart(options_.lag);
    // As an observation index. A start within `min_gap` of the last kept change is placed at
    // the first observation the gap allows: rejected there, a change that soon after another
    // (a speed-up of 11% at iteration 66, the link cap's x1.5 at 75: seen on the netns cluster)
    // aged past `lag` before it could be kept and was never proposed again. Its stretch before
    // then ends at the proposed start, when at least kPersistence observations lie between the
    // last kept change and it: the observations between the two starts are on neither side, so
    // the level before (the event's healthy time) and the ratio are the old level's.
    const int64_t proposed = start + bocd_offset_;
    const int64_t c = std::max(proposed, last_kept_ + th.min_gap);
    const int64_t before_end =
        c > proposed && proposed - last_kept_ >= OnlineDetectorOptions::kPersistence ? proposed : c;
    if (start >= 0 && n - c >= options_.min_after) {
      if (std::optional<DetectorEvent> event = Verify(c, q, /*again=*/false, before_end)) {
        return event;
      }
      if (options_.recheck > n - c) {
        if (recheck_first_ < 0) {
          recheck_first_ = c;
          recheck_last_ = c;
        }
        recheck_first_ = std::min(recheck_first_, c);
        recheck_last_ = std::max(recheck_last_, c);
        recheck_probability_ = q;
      }
    }
  }
  if (recheck_first_ < 0) return std::nullopt;
  // Where the change lies on the longer stretch: each proposal was placed on a few observations.
  // The split is searched from `lag` before the earliest proposal (at most `recheck` old).
  const int64_t earliest = std::max(recheck_first_, n - options_.recheck);
  const int64_t lowest = std::max(last_kept_ + th.min_gap, earliest - options_.lag);
  const int64_t from = std::max(last_kept_, lowest - options_.window);
  const int64_t lo = std::max(from + 1, lowest), hi = n - options_.min_after;
  if (lo > hi) return std::nullopt;
  return Verify(BestSplit(from, lo, hi), recheck_probability_, /*again=*/true);
}

int64_t OnlineDetector::BestSplit(int64_t from, int64_t lo, int64_t hi) const {
  const int64_t n = observations_;
  double total = 0;
  for (int64_t i = from; i < n; ++i) total += ValueAt(i);
  double head = 0;
  for (int64_t i = from; i < lo; ++i) head += ValueAt(i);
  int64_t best = -1;
  double best_score = -1;
  for (int64_t k = lo; k <= hi; ++k) {
    const double n1 = static_cast<double>(k - from), n2 = static_cast<double>(n - k);
    const double diff = (total - head) / n2 - head / n1;
    const double score = diff * diff * n1 * n2 / (n1 + n2);
    if (score > best_score) {
      best_score = score;
      best = k;
    }
    head += ValueAt(k);
  }
  return best;
}

std::optional<DetectorEvent> OnlineDetector::Verify(int64_t c, double probability, bool again,
                                                    int64_t before_end) {
  const DetectorThresholds& th = options_.thresholds;
  const int64_t n = observations_;
  if (before_end < 0) before_end = c;
  const int64_t before_begin = std::max(last_kept_, before_end - options_.window);
  if (before_begin >= before_end) return std::nullopt;
  before_.clear();
  after_.clear();
  for (int64_t i = before_begin; i < before_end; ++i) before_.push_back(ValueAt(i));
  for (int64_t i = c; i < n; ++i) after_.push_back(ValueAt(i));
  const LevelComparison cmp = CompareLevels(before_, after_, th.verification_ratio);
  if (!cmp.significant) return std::nullopt;
  // Again, on a longer stretch: it must be one level (its halves' medians within half the ratio
  // of each other). A stale proposal (a blip that failed) would
  // otherwise pass on a later change that its stretch after has come to hold, at the wrong start.
  if (again) {
    const auto halves = absl::MakeConstSpan(after_);
    const size_t half = halves.size() / 2;
    if (RelativeChange(common::Median(halves.first(half)), common::Median(halves.subspan(half))) >=
        0.5 * th.verification_ratio) {
      return std::nullopt;
    }
  }
  // The new level must still hold: a burst that is over is no change (nor a recovery that
  // relapsed). The latest observations' median differs from the level before by the threshold,
  // in the same direction, and sits nearer the new level than the old one.
  const size_t persist = std::min<size_t>(OnlineDetectorOptions::kPersistence,
                                          static_cast<size_t>(options_.min_after));
  const absl::Span<const double> latest_values = absl::MakeConstSpan(after_).last(persist);
  const double latest = common::Median(latest_values);
  const double midpoint = 0.5 * (cmp.median_before + cmp.median_after);
  const bool rose = cmp.median_after > cmp.median_before;
  if (RelativeChange(cmp.median_before, latest) < th.verification_ratio ||
      (rose ? latest < midpoint : latest > midpoint) ||
      (rose ? after_.back() < midpoint : after_.back() > midpoint)) {
    return std::nullopt;
  }
  DetectorEvent event;
  event.kind = levels_.Classify(cmp.mean_before, cmp.mean_after);
  event.iteration = IterationAt(c);
  event.decided_at = last_iteration_;
  event.before_iteration = IterationAt(before_begin);
  event.before_end_iteration = IterationAt(before_end);
  event.ratio = cmp.mean_before > 0 ? cmp.mean_after / cmp.mean_before : 0.0;
  event.probability = probability;
  event.mean_before = cmp.mean_before;
  event.mean_after = cmp.mean_after;
  event.latest.assign(latest_values.begin(), latest_values.end());
  last_kept_ = c;
  recheck_first_ = -1;
  return event;
}

double OnlineDetector::change_probability() const {
  return warmed_up() ? bocd_.ChangeProbabilityWithin(options_.lag) : 0.0;
}

size_t OnlineDetector::MemoryBytes() const {
  size_t bytes = sizeof(*this) - sizeof(Bocd) + bocd_.MemoryBytes();
  bytes += (ring_value_.capacity() + warmup_values_.capacity() + before_.capacity() +
            after_.capacity()) *
           sizeof(double);
  bytes += ring_iteration_.capacity() * sizeof(int64_t);
  return bytes;
}

absl::StatusOr<DetectorBank> DetectorBank::Create(const OnlineDetectorOptions& defaults) {
  if (absl::Status s = defaults.Validate(); !s.ok()) return s;
  return DetectorBank(defaults);
}

absl::StatusOr<std::optional<DetectorEvent>> DetectorBank::Add(const SeriesKey& key,
                                                               int64_t iteration,
                                                               absl::Duration time) {
  auto it = detectors_.find(key);
  if (it == detectors_.end()) {
    OnlineDetectorOptions options = defaults_;
    options.thresholds = Thresholds(key.job);
    absl::StatusOr<OnlineDetector> detector = OnlineDetector::Create(options);
    if (!detector.ok()) return detector.status();
    it = detectors_.emplace(key, *std::move(detector)).first;
  }
  return it->second.Add(iteration, time);
}

absl::Status DetectorBank::SetThresholds(absl::string_view job,
                                         const DetectorThresholds& thresholds) {
  if (absl::Status s = thresholds.Validate(); !s.ok()) return s;
  for (auto& [key, detector] : detectors_) {
    if (key.job != job) continue;
    if (absl::Status s = detector.SetThresholds(thresholds); !s.ok()) return s;
  }
  job_thresholds_[std::string(job)] = thresholds;
  return absl::OkStatus();
}

DetectorThresholds DetectorBank::Thresholds(absl::string_view job) const {
  auto it = job_thresholds_.find(job);
  return it == job_thresholds_.end() ? defaults_.thresholds : it->second;
}

void DetectorBank::RemoveJob(absl::string_view job) {
  absl::erase_if(detectors_, [&](const auto& entry) { return entry.first.job == job; });
  job_thresholds_.erase(job);
}

const OnlineDetector* DetectorBank::Find(const SeriesKey& key) const {
  auto it = detectors_.find(key);
  return it == detectors_.end() ? nullptr : &it->second;
}

}  // namespace falcon::analysis::detect
