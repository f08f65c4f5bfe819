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
  int64_t stage_step = 0;         // A step it had that stage in (for messages).
  std::vector<double> compute_s;  // Every iteration's.
  // compute / the median of its stage's other ranks, in iterations with a peer, and whether
  // that was slow, with the iteration.
  std::vector<double> ratios;
  std::vector<bool> slow_at;
  std::vector<int64_t> step_at;
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
  if (min_run < 1 || min_run > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("min_run: ", min_run, " not in [1, 1e6]"));
  }
  if (!(run_share >= 0 && run_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("run_share: ", run_share, " not in [0, 1]"));
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
      auto [it, first] = ranks.try_emplace(r.rank);
      RankStats& rs = it->second;
      if (first) {
        rs.stage = r.group;
        rs.stage_step = step.step;
      } else if (rs.stage != r.group) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", r.rank, " is in stage ", rs.stage, " at step ", rs.stage_step,
            " and in stage ", r.group, " at step ", step.step,
            ": imbalance needs one layout (analyse the iterations of each layout apart)"));
      }
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
      // Each against the others of its stage: with two ranks, the median of both would halve a
      // slow rank's excess. One sort per stage and step (a stage of a fleet-sized job has
      // thousands of ranks).
      const std::vector<double> peers = common::MediansExcludingEach(v);
      for (size_t i = 0; i < members.size(); ++i) {
        const double peer = peers[i];
        if (peer <= 0) continue;
        RankStats& rs = ranks[members[i].first];
        const bool slow = members[i].second >= (1 + options.slow_ratio) * peer;
        rs.ratios.push_back(members[i].second / peer);
        rs.slow_at.push_back(slow);
        rs.step_at.push_back(step.step);
        if (slow) ++rs.slow;
      }
    }
    if (by_stage.size() >= 2) ++slowest_stage_count[slowest_stage];
  }
  if (report.steps < options.min_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "imbalance needs at least ", options.min_steps,
        " iterations with two ranks in one stage or two stages to compare, got ", report.steps,
        " (of ", steps.size(), " iterations, ", ranks.size(), " ranks)"));
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
      for (const auto& [rank, rs] : ranks) si.ranks += rs.stage == stage ? 1 : 0;
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
    // The longest run of consecutive slow iterations: a fail-slow that began or ended within
    // the window is slow for a stretch, not for a share of the whole window.
    size_t best_from = 0, best_len = 0;
    for (size_t i = 0; i < rs.slow_at.size();) {
      if (!rs.slow_at[i]) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < rs.slow_at.size() && rs.slow_at[j]) ++j;
      if (j - i > best_len) {
        best_len = j - i;
        best_from = i;
      }
      i = j;
    }
    const double min_run =
        std::max<double>(options.min_run, options.run_share * static_cast<double>(report.steps));
    if (share >= options.persistent_share || static_cast<double>(best_len) >= min_run) {
      PersistentStraggler p;
      p.rank = rank;
      p.stage = rs.stage;
      p.slow_share = share;
      p.slow_iterations = rs.slow;
      p.iterations = static_cast<int>(rs.ratios.size());
      std::vector<double> while_slow;
      for (size_t i = 0; i < rs.ratios.size(); ++i) {
        if (rs.slow_at[i]) while_slow.push_back(rs.ratios[i]);
      }
      p.ratio = common::Median(while_slow);
      if (best_len > 0) {
        p.first_step = rs.step_at[best_from];
        p.last_step = rs.step_at[best_from + best_len - 1];
      }
      report.stragglers.push_back(p);
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
    if (s.ranks == 1) {
      out.push_back(absl::StrFormat(
          "stage %d computes x%.2f the other stages' median (slowest stage in %.0f%% of %d "
          "iterations), but it has one rank: a partition and a slow GPU cannot be told apart "
          "(compare it with a rank of the same stage in another replica)",
          s.stage, s.ratio, 100 * s.slowest_share, r.steps));
    } else {
      out.push_back(absl::StrFormat(
          "stage imbalance: stage %d computes x%.2f the other stages' median (slowest stage in "
          "%.0f%% of %d iterations): a partition, not a fail-slow; move about "
          "%.0f%% of its compute (layers) to the other stages",
          s.stage, s.ratio, 100 * s.slowest_share, r.steps, 100 * s.shed_fraction));
    }
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
        "persistent straggler: rank %d (stage %d) computes x%.2f the other ranks of its stage "
        "while slow, in %d of %d iterations (longest stretch: steps %d-%d): a fail-slow",
        p.rank, p.stage, p.ratio, p.slow_iterations, p.iterations, p.first_step, p.last_step));
  }
  if (out.empty()) out.push_back("no workload imbalance and no persistent straggler");
  return out;
}

}  // namespace falcon::analysis::detect
