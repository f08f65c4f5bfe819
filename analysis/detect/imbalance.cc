#include "analysis/detect/imbalance.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

struct RankStats {
  int64_t stage = 0;
  std::vector<double> compute_s;  // Every iteration's.
  std::vector<double> ratios;     // compute / its stage's median, iterations with a peer.
  int slow = 0;
};

}  // namespace

absl::Status ImbalanceOptions::Validate() const {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError(absl::StrCat("slow_ratio: ", slow_ratio, " not in (0, 10]"));
  }
  if (!(persistent_share > 0 && persistent_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("persistent_share: ", persistent_share, " not in (0, 1]"));
  }
  if (!(jitter_rank_share > 0 && jitter_rank_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("jitter_rank_share: ", jitter_rank_share, " not in (0, 1]"));
  }
  if (min_steps < 2 || min_steps > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("min_steps: ", min_steps, " not in [2, 1e6]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImbalanceReport> AnalyzeImbalance(const std::vector<BlameInput>& steps,
                                                 const ImbalanceOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  ImbalanceReport report;
  std::map<int64_t, RankStats> ranks;
  std::map<int64_t, std::vector<double>> stage_values;  // Every (iteration, rank) figure.
  std::map<int64_t, int> slowest_stage_count;
  std::vector<double> spreads;
  for (const BlameInput& step : steps) {
    std::map<int64_t, std::vector<std::pair<int64_t, double>>> by_stage;
    for (const RankCompute& r : step.ranks) {
      if (r.compute < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(
            absl::StrCat("step ", step.step, " rank ", r.rank, ": negative compute time"));
      }
      const double s = absl::ToDoubleSeconds(r.compute);
      by_stage[r.group].push_back({r.rank, s});
      RankStats& rs = ranks[r.rank];
      rs.stage = r.group;
      rs.compute_s.push_back(s);
      stage_values[r.group].push_back(s);
    }
    const bool comparable =
        by_stage.size() >= 2 || (by_stage.size() == 1 && by_stage.begin()->second.size() >= 2);
    if (!comparable) continue;
    ++report.steps;
    int64_t slowest_stage = -1;
    double slowest_median = -1;
    for (const auto& [stage, members] : by_stage) {
      std::vector<double> v;
      for (const auto& [rank, s] : members) v.push_back(s);
      const double median = common::Median(v);
      if (median > slowest_median) {
        slowest_median = median;
        slowest_stage = stage;
      }
      if (members.size() < 2 || median <= 0) continue;
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      spreads.push_back((*hi - *lo) / median);
      for (const auto& [rank, s] : members) {
        RankStats& rs = ranks[rank];
        rs.ratios.push_back(s / median);
        if (s >= (1 + options.slow_ratio) * median) ++rs.slow;
      }
    }
    if (by_stage.size() >= 2) ++slowest_stage_count[slowest_stage];
  }
  if (report.steps < options.min_steps) {
    return absl::InvalidArgumentError(absl::StrCat("imbalance needs at least ", options.min_steps,
                                                   " iterations with compute figures, got ",
                                                   report.steps));
  }
  report.stages = static_cast<int>(stage_values.size());
  report.ranks = static_cast<int>(ranks.size());
  for (const auto& [stage, values] : stage_values) {
    report.stage_compute_s.push_back(common::Median(values));
  }

  // Stage imbalance: the slowest stage, every rank of which sits above the other stages.
  if (stage_values.size() >= 2) {
    size_t worst = 0;
    for (size_t i = 1; i < report.stage_compute_s.size(); ++i) {
      if (report.stage_compute_s[i] > report.stage_compute_s[worst]) worst = i;
    }
    std::vector<double> others;
    for (size_t i = 0; i < report.stage_compute_s.size(); ++i) {
      if (i != worst) others.push_back(report.stage_compute_s[i]);
    }
    const double other = common::Median(others);
    const int64_t stage = std::next(stage_values.begin(), static_cast<long>(worst))->first;
    double floor = -1;  // The fastest rank of the stage (median over its iterations).
    for (const auto& [rank, rs] : ranks) {
      if (rs.stage != stage) continue;
      const double m = common::Median(rs.compute_s);
      floor = floor < 0 ? m : std::min(floor, m);
    }
    if (other > 0 && floor >= (1 + options.slow_ratio) * other) {
      StageImbalance si;
      si.stage = stage;
      si.ratio = report.stage_compute_s[worst] / other;
      si.slowest_share = static_cast<double>(slowest_stage_count[stage]) / report.steps;
      double mean = 0;
      for (double m : report.stage_compute_s) mean += m;
      mean /= static_cast<double>(report.stage_compute_s.size());
      si.shed_fraction = 1 - mean / report.stage_compute_s[worst];
      if (si.slowest_share >= options.persistent_share) report.stage_imbalance = si;
    }
  }

  // Persistent stragglers and jitter.
  int sometimes = 0;
  double max_share = 0;
  for (const auto& [rank, rs] : ranks) {
    if (rs.ratios.empty()) continue;
    const double share = static_cast<double>(rs.slow) / static_cast<double>(rs.ratios.size());
    max_share = std::max(max_share, share);
    if (rs.slow > 0) ++sometimes;
    if (share >= options.persistent_share) {
      report.stragglers.push_back({rank, rs.stage, share, common::Median(rs.ratios)});
    }
  }
  std::sort(
      report.stragglers.begin(), report.stragglers.end(),
      [](const PersistentStraggler& a, const PersistentStraggler& b) { return a.ratio > b.ratio; });
  if (sometimes >= 2 &&
      sometimes >= options.jitter_rank_share * static_cast<double>(report.ranks)) {
    DataJitter j;
    j.median_spread = spreads.empty() ? 0 : common::Median(spreads);
    j.ranks_sometimes_slow = sometimes;
    j.ranks = report.ranks;
    j.max_slow_share = max_share;
    report.jitter = j;
  }
  return report;
}

std::vector<std::string> DescribeImbalance(const ImbalanceReport& r,
                                           const ImbalanceOptions& options) {
  std::vector<std::string> out;
  if (r.stage_imbalance.has_value()) {
    const StageImbalance& s = *r.stage_imbalance;
    out.push_back(absl::StrFormat(
        "stage imbalance: stage %d computes x%.2f the other stages' median (slowest stage in "
        "%.0f%% of %d iterations): a partition, not a fail-slow; move about "
        "%.0f%% of its compute (layers) to the other stages",
        s.stage, s.ratio, 100 * s.slowest_share, r.steps, 100 * s.shed_fraction));
  }
  if (r.jitter.has_value()) {
    const DataJitter& j = *r.jitter;
    out.push_back(absl::StrFormat(
        "data-dependent jitter: compute differs by %.0f%% (median) across the ranks of a stage "
        "within an iteration; %d of %d ranks are >= %.0f%% above their stage in some iteration, "
        "none in more than %.0f%% of them: the work varies (e.g. sequence lengths), no rank is "
        "to blame",
        100 * j.median_spread, j.ranks_sometimes_slow, j.ranks, 100 * options.slow_ratio,
        100 * j.max_slow_share));
  }
  for (const PersistentStraggler& p : r.stragglers) {
    out.push_back(absl::StrFormat(
        "persistent straggler: rank %d (stage %d) computes x%.2f its stage's median, slow in "
        "%.0f%% of the iterations: a fail-slow",
        p.rank, p.stage, p.ratio, 100 * p.slow_share));
  }
  if (out.empty()) out.push_back("no workload imbalance and no persistent straggler");
  return out;
}

}  // namespace falcon::analysis::detect
