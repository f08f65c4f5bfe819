#include "analysis/detect/environment_shift.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The typical compute: the lower quartile across ranks (a quarter may be slow on their own),
// the smaller value of two ranks (one slow rank of two must not pass for half the job).
double LowerQuartile(const std::vector<double>& row) {
  return row.size() == 2 ? std::min(row[0], row[1]) : common::Quantile(row, 0.25);
}

// A rank stands out above its peers by more than this many thresholds (measured on healthy
// loaded runs: up to 1.40 at a threshold of 0.10).
constexpr double kStandoutThresholds = 5.0;
// A communicator stands out above the others by more than this many thresholds (measured on the
// namespaced cluster under a build's load: healthy runs up to 1.85x, 2 Mbit/s DP-link caps
// 5.6-7.7x at a threshold of 0.10; at 1 + 5θ, 2 of 3 healthy runs opened an event).
constexpr double kCommStandoutThresholds = 20.0;

absl::Status CheckStretch(const ComputeStretch& s, size_t columns, absl::string_view name) {
  if (s.values.size() != columns) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has ", s.values.size(), " rank columns, expected ", columns));
  }
  for (size_t r = 0; r < s.values.size(); ++r) {
    if (s.values[r].size() != s.values[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " column ", r, " has ",
                                                     s.values[r].size(), " iterations, column 0 ",
                                                     s.values[0].size()));
    }
    for (size_t i = 0; i < s.values[r].size(); ++i) {
      const double v = s.values[r][i];
      if (std::isnan(v)) continue;
      if (!(v > 0) || std::isinf(v)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " column ", r, " iteration ", i,
                                                       ": compute time must be > 0, got ", v));
      }
    }
  }
  return absl::OkStatus();
}

// Per iteration of `s`, the lower quartile across columns of value / level (columns with a
// level and a value; NaN for an iteration with fewer than 2 of them or than half the columns:
// an iteration most ranks have not reported yet, as when a rank's own series decides on its
// summary before the others', is no comparison).
std::vector<double> TypicalPerIteration(const ComputeStretch& s, absl::Span<const double> levels) {
  std::vector<double> out;
  if (s.values.empty()) return out;
  std::vector<double> row;
  for (size_t i = 0; i < s.values[0].size(); ++i) {
    row.clear();
    for (size_t r = 0; r < s.values.size(); ++r) {
      const double v = s.values[r][i];
      if (!std::isnan(v) && !std::isnan(levels[r])) row.push_back(v / levels[r]);
    }
    const size_t needed = std::max<size_t>(2, (s.values.size() + 1) / 2);
    out.push_back(row.size() >= needed ? LowerQuartile(row) : kNaN);
  }
  return out;
}

// The median of the finite per-iteration typical compute of `s`. NaN when none.
double TypicalLevel(const ComputeStretch& s, absl::Span<const double> levels) {
  std::vector<double> finite;
  for (double v : TypicalPerIteration(s, levels)) {
    if (!std::isnan(v)) finite.push_back(v);
  }
  return finite.empty() ? kNaN : common::Median(finite);
}

// Median of sorted `values` (size >= 2) without one occurrence of `value` (which it holds).
double MedianWithout(const std::vector<double>& values, double value) {
  const size_t skip =
      static_cast<size_t>(std::lower_bound(values.begin(), values.end(), value) - values.begin());
  const size_t n = values.size() - 1;
  auto at = [&](size_t k) { return values[k < skip ? k : k + 1]; };
  return n % 2 == 1 ? at(n / 2) : 0.5 * (at(n / 2 - 1) + at(n / 2));
}

double ColumnMedian(absl::Span<const double> column) {
  std::vector<double> v;
  for (double x : column) {
    if (!std::isnan(x)) v.push_back(x);
  }
  return v.empty() ? kNaN : common::Median(v);
}

}  // namespace

absl::Status EnvironmentOptions::Validate() const {
  if (!(min_relative_change > 0 && min_relative_change <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_relative_change must be in (0, 10], got ", min_relative_change));
  }
  return absl::OkStatus();
}

absl::StatusOr<ComputeBaseline> MeasureBaseline(absl::Span<const int32_t> stages,
                                                const ComputeStretch& before) {
  if (absl::Status s = CheckStretch(before, stages.size(), "before"); !s.ok()) return s;
  ComputeBaseline b;
  b.stages.assign(stages.begin(), stages.end());
  b.rank_levels.reserve(stages.size());
  for (const std::vector<double>& column : before.values) {
    b.rank_levels.push_back(ColumnMedian(column));
  }
  b.typical = TypicalLevel(before, b.rank_levels);
  return b;
}

absl::StatusOr<EnvironmentJudgement> JudgeEnvironment(double series_ratio,
                                                      const ComputeBaseline& baseline,
                                                      const ComputeStretch& after,
                                                      const EnvironmentOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (!(series_ratio > 0) || std::isinf(series_ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("series_ratio must be finite and > 0, got ", series_ratio));
  }
  if (baseline.stages.size() != baseline.rank_levels.size()) {
    return absl::InvalidArgumentError(absl::StrCat("baseline has ", baseline.stages.size(),
                                                   " stages for ", baseline.rank_levels.size(),
                                                   " rank levels"));
  }
  if (absl::Status s = CheckStretch(after, baseline.rank_levels.size(), "after"); !s.ok()) {
    return s;
  }
  const double theta = options.min_relative_change;
  EnvironmentJudgement j;
  // Each rank's own factor.
  std::vector<double> factor(after.values.size(), kNaN);
  for (size_t r = 0; r < after.values.size(); ++r) {
    const double level = baseline.rank_levels[r];
    const double now = ColumnMedian(after.values[r]);
    if (!std::isnan(level) && !std::isnan(now)) {
      factor[r] = now / level;
      ++j.ranks;
    }
  }
  if (j.ranks < 2) {
    j.reason = absl::StrCat("compute of ", j.ranks, " rank(s) on both sides: not comparable");
    return j;
  }
  // The rank that stands out most from its stage peers (every other rank without any).
  absl::flat_hash_map<int32_t, std::vector<double>> by_stage;  // Sorted factors; -1: all.
  for (size_t r = 0; r < factor.size(); ++r) {
    if (std::isnan(factor[r])) continue;
    by_stage[-1].push_back(factor[r]);
    if (baseline.stages[r] >= 0) by_stage[baseline.stages[r]].push_back(factor[r]);
  }
  for (auto& [stage, factors] : by_stage) std::sort(factors.begin(), factors.end());
  for (size_t r = 0; r < factor.size(); ++r) {
    if (std::isnan(factor[r])) continue;
    const int32_t stage = baseline.stages[r];
    const std::vector<double>* peers = &by_stage[-1];
    if (stage >= 0 && by_stage[stage].size() >= 2) peers = &by_stage[stage];
    const double excess = factor[r] / MedianWithout(*peers, factor[r]);
    if (j.standout_column < 0 || excess > j.standout_excess) {
      j.standout_column = static_cast<int64_t>(r);
      j.standout_excess = excess;
    }
  }
  const double typical_after = TypicalLevel(after, baseline.rank_levels);
  if (std::isnan(typical_after) || std::isnan(baseline.typical) || !(baseline.typical > 0)) {
    j.reason = "no iteration with the compute of 2 ranks on both sides";
    return j;
  }
  j.factor = typical_after / baseline.typical;
  if (j.standout_excess > 1 + kStandoutThresholds * theta) {
    j.reason = absl::StrFormat("rank column %d's compute rose x%.2f over its peers'",
                               j.standout_column, j.standout_excess);
  } else if (j.factor < 1 + theta / 2) {
    j.reason = absl::StrFormat("typical compute x%.2f: below 1 + threshold / 2", j.factor);
  } else if (j.factor - 1 < (series_ratio - 1) / kMaxAmplification) {
    j.reason = absl::StrFormat("typical compute x%.2f explains too little of the series' x%.2f",
                               j.factor, series_ratio);
  } else {
    j.environment = true;
    j.reason =
        absl::StrFormat("every rank's compute rose alike: typical x%.2f, most x%.2f over its peers",
                        j.factor, j.standout_excess);
  }
  return j;
}

absl::StatusOr<CommStandout> FindCommStandout(const CommStretches& comms, double theta,
                                              double series_rise) {
  if (comms.before.size() != comms.comm_ids.size() || comms.after.size() != comms.comm_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("comm stretches: ", comms.comm_ids.size(),
                                                   " comm_ids but ", comms.before.size(),
                                                   " before and ", comms.after.size(), " after"));
  }
  if (!(theta > 0 && theta <= 10)) {
    return absl::InvalidArgumentError(absl::StrCat("theta ", theta, ": need (0, 10]"));
  }
  if (!std::isfinite(series_rise)) {
    return absl::InvalidArgumentError(absl::StrCat("series_rise ", series_rise, ": not finite"));
  }
  auto median_of = [](const std::vector<double>& values) {
    std::vector<double> known;
    for (double v : values) {
      if (!std::isnan(v) && v > 0 && std::isfinite(v)) known.push_back(v);
    }
    return known.size() < 2 ? kNaN : common::Median(known);
  };
  struct Measured {
    uint64_t comm_id;
    double factor, rise;
  };
  std::vector<Measured> measured;
  for (size_t c = 0; c < comms.comm_ids.size(); ++c) {
    const double before = median_of(comms.before[c]);
    const double after = median_of(comms.after[c]);
    if (std::isnan(before) || std::isnan(after)) continue;
    measured.push_back({comms.comm_ids[c], after / before, after - before});
  }
  CommStandout out;
  out.measured = static_cast<int>(measured.size());
  if (measured.size() < 3) return out;
  for (size_t c = 0; c < measured.size(); ++c) {
    std::vector<double> others;
    for (size_t o = 0; o < measured.size(); ++o) {
      if (o != c) others.push_back(measured[o].factor);
    }
    const double median = common::Median(others);
    if (out.comm_id == 0 || measured[c].factor / median > out.factor / out.others) {
      out.comm_id = measured[c].comm_id;
      out.factor = measured[c].factor;
      out.others = median;
      out.rise = measured[c].rise;
    }
  }
  out.stands_out = out.factor >= 1 + 2 * theta &&
                   out.factor > out.others * (1 + kCommStandoutThresholds * theta) &&
                   out.rise >= series_rise / kMaxAmplification;
  return out;
}

absl::StatusOr<std::vector<double>> TypicalCompute(const ComputeBaseline& baseline,
                                                   const ComputeStretch& stretch) {
  if (absl::Status s = CheckStretch(stretch, baseline.rank_levels.size(), "stretch"); !s.ok()) {
    return s;
  }
  if (std::isnan(baseline.typical) || !(baseline.typical > 0)) {
    return absl::InvalidArgumentError("baseline has no typical compute level");
  }
  std::vector<double> out = TypicalPerIteration(stretch, baseline.rank_levels);
  for (double& v : out) v /= baseline.typical;
  return out;
}

}  // namespace falcon::analysis::detect
