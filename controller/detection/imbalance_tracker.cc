#include "controller/detection/imbalance_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/stats.h"

namespace falcon::controller::detection {

absl::Status ImbalanceTrackerOptions::Validate() const {
  if (absl::Status s = analysis.Validate(); !s.ok()) return s;
  if (window < analysis.min_steps || window > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("window: ", window, " not in [", analysis.min_steps, ", 100000]"));
  }
  if (every < 1 || every > window) {
    return absl::InvalidArgumentError(absl::StrCat("every: ", every, " not in [1, ", window, "]"));
  }
  return absl::OkStatus();
}

bool ImbalanceTracker::Add(const registry::JobEntry& job,
                           const falcon::v1::IterationSummary& summary) {
  const falcon::v1::RankInfo* info = job.FindRank(summary.rank());
  if (info == nullptr || info->pp_index() < 0) return false;
  // Compute per micro-batch of the rank's DP group under the plan in force (even without one).
  double micro_batches = 1;
  const auto& plan = job.job().micro_batches();
  if (info->dp_index() >= 0 && info->dp_index() < plan.size()) {
    if (plan[info->dp_index()] == 0) return false;  // The group runs nothing: no figure.
    micro_batches = plan[info->dp_index()];
  }
  JobState& state = jobs_[job.name()];
  // A new layout (S3 moved ranks between stages): the window starts over.
  auto [known, first] = state.stage_of.try_emplace(summary.rank(), info->pp_index());
  if (!first && known->second != info->pp_index()) {
    state.steps.clear();
    state.stage_of.clear();
    state.stage_of[summary.rank()] = info->pp_index();
    state.new_iterations = 0;
  }
  auto [it, inserted] = state.steps.try_emplace(summary.iteration());
  if (inserted) {
    it->second.step = summary.iteration();
    ++state.new_iterations;
    while (static_cast<int64_t>(state.steps.size()) > options_.window) {
      state.steps.erase(state.steps.begin());
    }
    // An iteration older than the window was added and dropped at once.
    if (state.steps.find(summary.iteration()) == state.steps.end()) return false;
  }
  it->second.ranks.push_back(
      {summary.rank(), info->pp_index(), absl::Nanoseconds(summary.compute_ns()) / micro_batches});
  if (state.new_iterations < options_.every) return false;
  state.new_iterations = 0;
  // Every iteration but the newest, which may still be missing ranks.
  std::vector<analysis::detect::BlameInput> steps;
  steps.reserve(state.steps.size());
  for (auto s = state.steps.begin(); s != std::prev(state.steps.end()); ++s) {
    steps.push_back(s->second);
  }
  absl::StatusOr<analysis::detect::ImbalanceReport> report =
      analysis::detect::AnalyzeImbalance(steps, options_.analysis);
  // Too few iterations yet is the one error the inputs allow (compute_ns is validated >= 0).
  if (!report.ok()) return false;
  state.report = *std::move(report);
  return true;
}

const analysis::detect::ImbalanceReport* ImbalanceTracker::Report(const std::string& job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.report.has_value()) return nullptr;
  return &*it->second.report;
}

bool ImbalanceTracker::IsBlameless(const std::string& job, uint32_t rank, int64_t since_iteration,
                                   std::string* why) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.report.has_value()) return false;
  const analysis::detect::ImbalanceReport& r = *it->second.report;
  // Rank's stage and how often it was slow against its stage's median since `since_iteration`.
  int64_t stage = -1;
  int seen = 0, slow = 0;
  int streak = 0;  // Slow in each of the rank's newest iterations (a fault that began mid-window).
  for (auto s = it->second.steps.lower_bound(since_iteration); s != it->second.steps.end(); ++s) {
    const analysis::detect::RankCompute* own = nullptr;
    for (const analysis::detect::RankCompute& c : s->second.ranks) {
      if (c.rank == rank) own = &c;
    }
    if (own == nullptr) continue;
    stage = own->group;
    std::vector<double> peers;
    for (const analysis::detect::RankCompute& c : s->second.ranks) {
      if (c.group == own->group) peers.push_back(absl::ToDoubleSeconds(c.compute));
    }
    if (peers.size() < 2) continue;
    ++seen;
    if (absl::ToDoubleSeconds(own->compute) >=
        (1 + options_.analysis.slow_ratio) * common::Median(peers)) {
      ++slow;
      ++streak;
    } else {
      streak = 0;
    }
  }
  if (seen > 0 && slow >= options_.analysis.persistent_share * seen) return false;
  // An event whose onset was noise before the fault: the fault's iterations are a suffix of the
  // window, too short yet for a majority, but jitter is not slow kPersistentStreak times running.
  if (streak >= kPersistentStreak) return false;
  std::string reason;
  if (r.jitter.has_value()) {
    reason = absl::StrFormat(
        "data-dependent jitter: %d of %d ranks are sometimes slow, none persistently",
        r.jitter->ranks_sometimes_slow, r.jitter->ranks);
  } else if (r.stage_imbalance.has_value() && r.stage_imbalance->stage == stage &&
             r.stage_imbalance->ranks > 1) {
    reason = absl::StrFormat("stage %d computes x%.2f the other stages' median by its partition",
                             stage, r.stage_imbalance->ratio);
  } else {
    return false;
  }
  if (why != nullptr) {
    *why = absl::StrFormat("%s; rank %d was slow in %d of %d iterations since %d", reason, rank,
                           slow, seen, since_iteration);
  }
  return true;
}

falcon::v1::WorkloadImbalance ImbalanceTracker::ToProto(
    const analysis::detect::ImbalanceReport& r, const analysis::detect::ImbalanceOptions& options) {
  falcon::v1::WorkloadImbalance out;
  out.set_iterations(r.steps);
  if (r.stage_imbalance.has_value()) {
    out.set_stage_imbalanced(true);
    out.set_stage(static_cast<uint32_t>(r.stage_imbalance->stage));
    out.set_stage_ratio(r.stage_imbalance->ratio);
    out.set_stage_shed_fraction(r.stage_imbalance->shed_fraction);
  }
  if (r.jitter.has_value()) {
    out.set_jitter(true);
    out.set_jitter_spread(r.jitter->median_spread);
    out.set_jitter_ranks(static_cast<uint32_t>(r.jitter->ranks_sometimes_slow));
  }
  for (const analysis::detect::PersistentStraggler& p : r.stragglers) {
    out.add_persistent_stragglers(static_cast<uint32_t>(p.rank));
  }
  for (const std::string& f : analysis::detect::DescribeImbalance(r, options)) {
    out.add_findings(f);
  }
  return out;
}

}  // namespace falcon::controller::detection
