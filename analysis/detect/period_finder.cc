#include "analysis/detect/period_finder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace falcon::analysis::detect {

uint64_t OpSymbol(int op_kind, uint64_t comm_id) {
  // splitmix64 finalizer: deterministic across processes (absl::Hash is seeded per process).
  uint64_t z = comm_id + 0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(op_kind) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

absl::Status PeriodOptions::Validate() const {
  if (max_lag < 1 || max_lag > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_lag must be in [1, 100000], got ", max_lag));
  }
  if (window < 2 || window > 10000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("window must be in [2, 10000000], got ", window));
  }
  if (!(threshold > 0 && threshold <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold must be in (0, 1], got ", threshold));
  }
  if (!(rare_ratio >= 0 && rare_ratio <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rare_ratio must be in [0, 1], got ", rare_ratio));
  }
  return absl::OkStatus();
}

absl::StatusOr<PeriodResult> FindPeriod(absl::Span<const OpEvent> ops,
                                        const PeriodOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const int64_t total = static_cast<int64_t>(ops.size());
  const int64_t len = std::min<int64_t>(total, options.window);
  const int64_t base = total - len;
  const absl::Span<const OpEvent> w = ops.subspan(base);
  for (int64_t i = 1; i < len; ++i) {
    if (w[i].timestamp_ns < w[i - 1].timestamp_ns) {
      return absl::InvalidArgumentError(
          absl::StrCat("op ", base + i, " has timestamp ", w[i].timestamp_ns,
                       " ns, before the previous op's ", w[i - 1].timestamp_ns, " ns"));
    }
  }

  // Which symbols take part.
  absl::flat_hash_map<uint64_t, int64_t> counts;
  for (const OpEvent& op : w) ++counts[op.symbol];
  const absl::flat_hash_set<uint64_t> listed(options.ignore_symbols.begin(),
                                             options.ignore_symbols.end());
  const int64_t stray_below = std::max<int64_t>(2, len / (2 * options.max_lag));
  std::vector<int64_t> regular_counts;
  for (const auto& [symbol, count] : counts) {
    if (count >= stray_below && !listed.contains(symbol)) regular_counts.push_back(count);
  }
  std::sort(regular_counts.begin(), regular_counts.end());
  const double rare_below =
      regular_counts.empty()
          ? 0.0
          : options.rare_ratio *
                static_cast<double>(regular_counts[(regular_counts.size() - 1) / 2]);
  PeriodResult result;
  absl::flat_hash_map<uint64_t, int32_t> dense;  // Kept symbol -> id, in order of first use.
  std::vector<int64_t> kept_counts;
  for (const OpEvent& op : w) {
    const int64_t count = counts[op.symbol];
    const bool kept = count >= stray_below && !listed.contains(op.symbol) &&
                      static_cast<double>(count) >= rare_below;
    if (kept && !dense.contains(op.symbol)) {
      dense.emplace(op.symbol, static_cast<int32_t>(kept_counts.size()));
      kept_counts.push_back(count);
    }
  }
  for (const auto& [symbol, count] : counts) {
    if (!dense.contains(symbol)) result.ignored_symbols.push_back(symbol);
  }
  std::sort(result.ignored_symbols.begin(), result.ignored_symbols.end());

  std::vector<int32_t> f;        // Kept ops as dense ids.
  std::vector<int64_t> f_index;  // Their input indices.
  f.reserve(len);
  f_index.reserve(len);
  for (int64_t i = 0; i < len; ++i) {
    auto it = dense.find(w[i].symbol);
    if (it == dense.end()) continue;
    f.push_back(it->second);
    f_index.push_back(base + i);
  }
  const int64_t lf = static_cast<int64_t>(f.size());
  if (lf < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("need at least 2 recurring ops to find a period, got ", lf, " of ", len));
  }

  // The ACF over lags 1..min(max_lag, lf / 2).
  const size_t v = kept_counts.size();
  if (v == 1) {
    result.period = 1;
    result.acf = 1.0;
  } else {
    std::vector<double> mu(v);
    double s2 = 0;
    for (size_t s = 0; s < v; ++s) {
      mu[s] = static_cast<double>(kept_counts[s]) / static_cast<double>(lf);
      s2 += mu[s] * mu[s];
    }
    std::vector<double> prefix(lf + 1, 0.0);  // prefix[t] = sum_{i<t} mu[f_i]
    for (int64_t t = 0; t < lf; ++t) prefix[t + 1] = prefix[t] + mu[f[t]];
    const double var = 1.0 - s2;
    const int64_t max_lag = std::min<int64_t>(options.max_lag, lf / 2);
    const int32_t* data = f.data();
    for (int64_t k = 1; k <= max_lag; ++k) {
      int64_t matches = 0;
      const int64_t n = lf - k;
      for (int64_t t = 0; t < n; ++t) matches += data[t] == data[t + k];
      const double cross = (static_cast<double>(matches) - prefix[n] - (prefix[lf] - prefix[k])) /
                               static_cast<double>(n) +
                           s2;
      const double acf = cross / var;
      if (acf >= options.threshold) {
        result.period = static_cast<int>(k);
        result.acf = acf;
        break;
      }
    }
    if (result.period == 0) {
      return absl::NotFoundError(absl::StrCat("no lag up to ", max_lag, " reaches ACF ",
                                              options.threshold, " over ", lf, " recurring ops"));
    }
  }

  // Anchor: fewest occurrences per period, first seen on ties (dense ids are in order of first
  // use).
  int32_t anchor = 0;
  int per_period = 0;
  for (size_t s = 0; s < v; ++s) {
    const int m =
        std::max<int>(1, static_cast<int>(std::lround(static_cast<double>(kept_counts[s]) *
                                                      result.period / static_cast<double>(lf))));
    if (per_period == 0 || m < per_period) {
      per_period = m;
      anchor = static_cast<int32_t>(s);
    }
  }
  for (const auto& [symbol, id] : dense) {
    if (id == anchor) result.anchor = symbol;
  }
  result.anchor_per_period = per_period;
  int64_t occurrence = 0;
  for (int64_t t = 0; t < lf; ++t) {
    if (f[t] != anchor) continue;
    if (occurrence++ % per_period == 0) result.boundaries.push_back(f_index[t]);
  }
  result.offset = result.boundaries.front();
  for (size_t i = 1; i < result.boundaries.size(); ++i) {
    result.iteration_times.push_back(absl::Nanoseconds(ops[result.boundaries[i]].timestamp_ns -
                                                       ops[result.boundaries[i - 1]].timestamp_ns));
  }
  result.ops_per_iteration =
      result.boundaries.size() > 1
          ? static_cast<double>(result.boundaries.back() - result.boundaries.front()) /
                static_cast<double>(result.boundaries.size() - 1)
          : static_cast<double>(len) * result.period / static_cast<double>(lf);
  return result;
}

IterationTracker::IterationTracker(const Options& options) : options_(options) {}

absl::StatusOr<IterationTracker> IterationTracker::Create(const Options& options) {
  if (absl::Status s = options.period.Validate(); !s.ok()) return s;
  if (options.redetect_every < 1 || options.redetect_every > 10000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("redetect_every must be in [1, 10000000], got ", options.redetect_every));
  }
  return IterationTracker(options);
}

std::optional<int> IterationTracker::period() const {
  if (period_ == 0) return std::nullopt;
  return period_;
}

absl::StatusOr<std::optional<absl::Duration>> IterationTracker::Add(const OpEvent& op) {
  if (seen_ > 0 && op.timestamp_ns < last_ts_) {
    return absl::InvalidArgumentError(absl::StrCat("op ", seen_, " has timestamp ", op.timestamp_ns,
                                                   " ns, before the previous ", last_ts_, " ns"));
  }
  recent_.push_back(op);
  if (recent_.size() > static_cast<size_t>(options_.period.window)) recent_.pop_front();
  ++seen_;
  last_ts_ = op.timestamp_ns;
  std::optional<absl::Duration> out;
  if (period_ > 0 && !ignored_.contains(op.symbol)) ++kept_since_boundary_;
  if (period_ > 0 && op.symbol == anchor_ && anchor_seen_++ % anchor_per_period_ == 0) {
    const int64_t n = kept_since_boundary_;
    if (last_boundary_ns_.has_value()) {
      if (n >= period_ && n <= period_ + std::max(2, period_ / 8)) {
        out = absl::Nanoseconds(op.timestamp_ns - *last_boundary_ns_);
        misfits_ = 0;
      } else if (++misfits_ >= 3) {
        Forget();
        return out;
      }
    }
    last_boundary_ns_ = op.timestamp_ns;
    kept_since_boundary_ = 0;
  }
  if (seen_ % options_.redetect_every == 0) Redetect();
  return out;
}

void IterationTracker::Forget() {
  period_ = 0;
  misfits_ = 0;
  recent_.clear();
}

void IterationTracker::Redetect() {
  scratch_.assign(recent_.begin(), recent_.end());
  absl::StatusOr<PeriodResult> found = FindPeriod(scratch_, options_.period);
  if (!found.ok()) return;  // Keep the current period (or none) until one is found.
  if (found->period == period_ && found->anchor_per_period == anchor_per_period_) {
    ignored_.insert(found->ignored_symbols.begin(), found->ignored_symbols.end());
    return;
  }
  // A different period: adopt it only if the most recent half of the window agrees.
  const absl::Span<const OpEvent> half = absl::MakeConstSpan(scratch_).last(scratch_.size() / 2);
  absl::StatusOr<PeriodResult> check = FindPeriod(half, options_.period);
  if (!check.ok() || check->period != found->period) return;
  period_ = found->period;
  anchor_ = found->anchor;
  anchor_per_period_ = found->anchor_per_period;
  anchor_seen_ = 0;
  misfits_ = 0;
  last_boundary_ns_.reset();
  kept_since_boundary_ = 0;
  ignored_.clear();
  ignored_.insert(found->ignored_symbols.begin(), found->ignored_symbols.end());
}

}  // namespace falcon::analysis::detect
