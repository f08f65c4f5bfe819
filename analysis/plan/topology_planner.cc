#include "analysis/plan/topology_planner.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/plan/topology_search.h"

namespace falcon::analysis::plan {
namespace {

using topology_internal::BuildProblem;
using topology_internal::Key;
using topology_internal::Problem;
using topology_internal::Search;

// The cost model's JobTiming for units placed by `unit_at` (slot → unit).
JobTiming Timing(const Problem& p, const std::vector<int>& unit_at, const TopologyCostModel& m) {
  JobTiming job;
  job.replicas.resize(p.dp);
  for (int d = 0; d < p.dp; ++d) {
    PipelineTiming& r = job.replicas[d];
    r.micro_batches = m.micro_batches;
    for (int s = 0; s < p.pp; ++s) {
      const absl::Duration base =
          m.stage_compute.size() == 1 ? m.stage_compute[0] : m.stage_compute[s];
      r.stage_compute.push_back(base * p.unit_slowdown[unit_at[d * p.pp + s]]);
      if (s + 1 < p.pp) {
        const int x = p.unit_node[unit_at[d * p.pp + s]];
        const int y = p.unit_node[unit_at[d * p.pp + s + 1]];
        r.boundary_p2p.push_back(m.p2p * p.PairSlowdown(x, y));
      }
    }
  }
  // Stage s's all-reduce runs at the pace of the slowest slow link between two of its nodes.
  std::vector<std::vector<bool>> hosts(p.pp, std::vector<bool>(p.nodes(), false));
  for (int slot = 0; slot < p.units(); ++slot)
    hosts[slot % p.pp][p.unit_node[unit_at[slot]]] = true;
  job.stage_allreduce.assign(p.pp, m.allreduce);
  for (int s = 0; s < p.pp; ++s) {
    double factor = 1.0;
    for (const Problem::Pair& pair : p.pairs) {
      if (hosts[s][pair.a] && hosts[s][pair.b]) factor = std::max(factor, pair.slowdown);
    }
    job.stage_allreduce[s] = m.allreduce * factor;
  }
  return job;
}

struct LinkUse {
  int in_dp = 0;
  int in_pp = 0;
};

LinkUse CountLinkUse(const Problem& p, const std::vector<int>& unit_at) {
  LinkUse use;
  for (const Problem::Pair& pair : p.pairs) {
    bool dp = false, pp = false;
    for (int s = 0; s < p.pp && !dp; ++s) {
      bool on_a = false, on_b = false;
      for (int d = 0; d < p.dp; ++d) {
        const int node = p.unit_node[unit_at[d * p.pp + s]];
        on_a |= node == pair.a;
        on_b |= node == pair.b;
      }
      dp = on_a && on_b;
    }
    for (int slot = 0; slot < p.units() && !pp; ++slot) {
      if ((slot + 1) % p.pp == 0) continue;
      const int x = p.unit_node[unit_at[slot]], y = p.unit_node[unit_at[slot + 1]];
      pp = (x == pair.a && y == pair.b) || (x == pair.b && y == pair.a);
    }
    use.in_dp += dp ? 1 : 0;
    use.in_pp += pp ? 1 : 0;
  }
  return use;
}

int StragglerStages(const Problem& p, const std::vector<int>& unit_at) {
  std::vector<bool> slow(p.pp, false);
  for (int slot = 0; slot < p.units(); ++slot) {
    if (p.unit_slowdown[unit_at[slot]] > 1.0) slow[slot % p.pp] = true;
  }
  return static_cast<int>(std::count(slow.begin(), slow.end(), true));
}

}  // namespace

absl::Status TopologyCostModel::Validate(int pp) const {
  if (micro_batches < 1 || micro_batches > kMaxReplicaMicroBatches) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batches: must be in [1, ", kMaxReplicaMicroBatches, "], got ", micro_batches));
  }
  if (stage_compute.size() != 1 && stage_compute.size() != static_cast<size_t>(pp)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_compute: has ", stage_compute.size(), " entries, want 1 or P = ", pp));
  }
  for (size_t s = 0; s < stage_compute.size(); ++s) {
    if (stage_compute[s] < absl::ZeroDuration() || stage_compute[s] > absl::Hours(1)) {
      return absl::InvalidArgumentError(absl::StrCat("stage_compute[", s,
                                                     "]: must be in [0, 1h], got ",
                                                     absl::FormatDuration(stage_compute[s])));
    }
  }
  const std::pair<const char*, absl::Duration> times[] = {{"p2p", p2p}, {"allreduce", allreduce}};
  for (const auto& [name, t] : times) {
    if (t < absl::ZeroDuration() || t > absl::Hours(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be in [0, 1h], got ", absl::FormatDuration(t)));
    }
  }
  const std::pair<const char*, int64_t> sizes[] = {
      {"stage_state_bytes_per_rank", stage_state_bytes_per_rank},
      {"dp_state_bytes_per_rank", dp_state_bytes_per_rank}};
  for (const auto& [name, bytes] : sizes) {
    if (bytes < 0 || bytes > (int64_t{1} << 50)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": must be in [0, 2^50], got ", bytes));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<JobTiming> LayoutTiming(const Layout& layout,
                                       const std::vector<SlowLink>& slow_links,
                                       const std::vector<SlowRank>& slow_ranks,
                                       const TopologyCostModel& model) {
  if (layout.world_size() == 0) return absl::InvalidArgumentError("layout: empty");
  if (absl::Status s = model.Validate(layout.pp_size()); !s.ok()) return s;
  absl::StatusOr<Problem> p = BuildProblem(layout, slow_links, slow_ranks);
  if (!p.ok()) return p.status();
  std::vector<int> identity(p->units());
  for (int u = 0; u < p->units(); ++u) identity[u] = u;
  return Timing(*p, identity, model);
}

absl::StatusOr<TopologyPlan> PlanTopology(const Layout& layout,
                                          const std::vector<SlowLink>& slow_links,
                                          const std::vector<SlowRank>& slow_ranks,
                                          const TopologyPlannerOptions& options) {
  if (layout.world_size() == 0) return absl::InvalidArgumentError("layout: empty");
  const TopologyCostModel& model = options.model;
  if (absl::Status s = model.Validate(layout.pp_size()); !s.ok()) return s;
  if (options.max_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_steps: must be >= 0, got ", options.max_steps));
  }
  absl::StatusOr<Problem> problem = BuildProblem(layout, slow_links, slow_ranks);
  if (!problem.ok()) return problem.status();
  const Problem& p = *problem;
  const int max_steps = options.max_steps > 0 ? options.max_steps : 4 * p.units() + 16;

  std::vector<int> identity(p.units());
  for (int u = 0; u < p.units(); ++u) identity[u] = u;
  TopologyPlan plan;
  plan.notes = p.notes;
  plan.before = *EstimateIteration(Timing(p, identity, model));

  // Candidates: the current layout, then each enabled search variant.
  struct Candidate {
    std::vector<int> unit_at;
    IterationEstimate estimate;
    int64_t bytes;
    Key key;
  };
  std::vector<Candidate> candidates;
  const bool links = options.move_links && !p.pairs.empty();
  const bool stragglers = options.consolidate_stragglers && p.slow_units > 0;
  std::vector<std::pair<bool, bool>> variants;
  if (links && stragglers) variants.push_back({true, true});
  if (links) variants.push_back({true, false});
  if (stragglers) variants.push_back({false, true});
  for (const auto& [use_links, use_stragglers] : variants) {
    Search search(p, model, use_links, use_stragglers);
    search.Run(max_steps);
    candidates.push_back({search.unit_at(), *EstimateIteration(Timing(p, search.unit_at(), model)),
                          search.bytes(), search.key()});
  }
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates) {
    if (c.estimate.iteration >= plan.before.iteration) continue;
    if (best == nullptr ||
        std::tie(c.estimate.iteration, c.bytes, std::get<5>(c.key), std::get<6>(c.key)) <
            std::tie(best->estimate.iteration, best->bytes, std::get<5>(best->key),
                     std::get<6>(best->key))) {
      best = &c;
    }
  }
  if (variants.empty()) {
    plan.notes.push_back("no inter-node slow links and no slow ranks: nothing to plan");
  } else if (best == nullptr) {
    plan.notes.push_back("no layout found with a predicted gain: keeping the current layout");
  }
  const std::vector<int>& unit_at = best != nullptr ? best->unit_at : identity;
  plan.after = best != nullptr ? best->estimate : plan.before;

  // The new layout: unit u (input slot u) moves, with its node and tp indices, to its new slot.
  std::vector<RankPlacement> ranks = layout.ranks();
  for (int slot = 0; slot < p.units(); ++slot) {
    const int u = unit_at[slot];
    const int old_dp = u / p.pp, old_pp = u % p.pp;
    const int new_dp = slot / p.pp, new_pp = slot % p.pp;
    for (int t = 0; t < p.tp; ++t) {
      RankPlacement& r = ranks[layout.RankAt(old_dp, old_pp, t)];
      r.dp = new_dp;
      r.pp = new_pp;
      if (new_dp != old_dp || new_pp != old_pp) {
        plan.moved_ranks.push_back(r.rank);
        if (new_pp != old_pp) {
          ++plan.ranks_changing_stage;
          plan.bytes_to_move += model.stage_state_bytes_per_rank;
        } else {
          plan.bytes_to_move += model.dp_state_bytes_per_rank;
        }
      }
    }
  }
  std::sort(plan.moved_ranks.begin(), plan.moved_ranks.end());
  absl::StatusOr<Layout> new_layout = Layout::Create(std::move(ranks));
  if (!new_layout.ok()) {
    return absl::InternalError(
        absl::StrCat("S3 produced an invalid layout: ", new_layout.status().message()));
  }
  plan.layout = *std::move(new_layout);
  const LinkUse use_before = CountLinkUse(p, identity), use_after = CountLinkUse(p, unit_at);
  plan.slow_links_in_dp_before = use_before.in_dp;
  plan.slow_links_in_pp_before = use_before.in_pp;
  plan.slow_links_in_dp_after = use_after.in_dp;
  plan.slow_links_in_pp_after = use_after.in_pp;
  plan.straggler_stages_before = StragglerStages(p, identity);
  plan.straggler_stages_after = StragglerStages(p, unit_at);
  return plan;
}

}  // namespace falcon::analysis::plan
