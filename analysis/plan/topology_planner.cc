#include "analysis/plan/topology_planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace falcon::analysis {
namespace {

constexpr int64_t kDpWeight = 1024;  // a DP stage over a slow link outweighs any PP hops
constexpr double kMaxSlowdown = 1000.0;

// The job reduced to TP groups ("units") and nodes. Unit u is the TP group that the input layout
// places at slot u = dp·P + pp; it never changes node.
struct Problem {
  int dp = 0, pp = 0, tp = 0;
  std::vector<std::string> node_names;  // sorted; node index = position
  std::vector<int> unit_node;
  std::vector<double> unit_slowdown;  // 1 when healthy
  std::vector<std::vector<int>> units_on_node;
  struct Pair {
    int a, b;  // node indices, a < b
    double slowdown;
    int64_t weight;
  };
  std::vector<Pair> pairs;
  std::vector<std::vector<int>> pairs_of_node;
  absl::flat_hash_map<int64_t, int> pair_of_nodes;  // a·N + b → pair index
  int slow_units = 0;
  std::vector<std::string> notes;

  int units() const { return dp * pp; }
  int nodes() const { return static_cast<int>(node_names.size()); }
  double PairSlowdown(int x, int y) const {
    if (x == y) return 1.0;
    auto it = pair_of_nodes.find(static_cast<int64_t>(std::min(x, y)) * nodes() + std::max(x, y));
    return it == pair_of_nodes.end() ? 1.0 : pairs[it->second].slowdown;
  }
};

absl::Status CheckSlowdown(double slowdown, const std::string& field) {
  if (!(slowdown >= 1.0 && slowdown <= kMaxSlowdown)) {  // also rejects NaN
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be in [1, ", kMaxSlowdown, "], got ", slowdown));
  }
  return absl::OkStatus();
}

absl::StatusOr<Problem> BuildProblem(const Layout& layout, const std::vector<SlowLink>& links,
                                     const std::vector<SlowRank>& ranks) {
  Problem p;
  p.dp = layout.dp_size();
  p.pp = layout.pp_size();
  p.tp = layout.tp_size();
  std::map<std::string, int> node_index;
  for (const RankPlacement& r : layout.ranks()) node_index.emplace(r.node, 0);
  for (auto& [name, index] : node_index) {
    index = static_cast<int>(p.node_names.size());
    p.node_names.push_back(name);
  }
  p.unit_node.resize(p.units());
  p.units_on_node.resize(p.nodes());
  for (int d = 0; d < p.dp; ++d) {
    for (int s = 0; s < p.pp; ++s) {
      const int u = d * p.pp + s;
      p.unit_node[u] = node_index[layout.NodeAt(d, s)];
      p.units_on_node[p.unit_node[u]].push_back(u);
    }
  }
  const int world = layout.world_size();
  p.unit_slowdown.assign(p.units(), 1.0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string field = absl::StrCat("slow_ranks[", i, "]");
    if (ranks[i].rank < 0 || ranks[i].rank >= world) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".rank: ", ranks[i].rank,
                                                     " is not a rank of the layout (world size ",
                                                     world, ")"));
    }
    if (absl::Status s = CheckSlowdown(ranks[i].slowdown, field + ".slowdown"); !s.ok()) return s;
    const RankPlacement& r = layout.at(ranks[i].rank);
    double& slowdown = p.unit_slowdown[r.dp * p.pp + r.pp];
    slowdown = std::max(slowdown, ranks[i].slowdown);
  }
  for (double s : p.unit_slowdown) p.slow_units += s > 1.0 ? 1 : 0;
  p.pairs_of_node.resize(p.nodes());
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string field = absl::StrCat("slow_links[", i, "]");
    const SlowLink& l = links[i];
    for (const auto& [name, rank] : {std::pair{"src_rank", l.src_rank}, {"dst_rank", l.dst_rank}}) {
      if (rank < 0 || rank >= world) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".", name, ": ", rank, " is not a rank of the layout (world size ", world, ")"));
      }
    }
    if (l.src_rank == l.dst_rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": src_rank and dst_rank are both ", l.src_rank));
    }
    if (absl::Status s = CheckSlowdown(l.slowdown, field + ".slowdown"); !s.ok()) return s;
    const int x = node_index[layout.at(l.src_rank).node];
    const int y = node_index[layout.at(l.dst_rank).node];
    if (x == y) {
      p.notes.push_back(absl::StrCat(field, ": ranks ", l.src_rank, " and ", l.dst_rank,
                                     " share node ", p.node_names[x],
                                     "; S3 cannot move an intra-node link (ignored)"));
      continue;
    }
    const int a = std::min(x, y), b = std::max(x, y);
    const int64_t key = static_cast<int64_t>(a) * p.nodes() + b;
    auto [it, inserted] = p.pair_of_nodes.emplace(key, static_cast<int>(p.pairs.size()));
    if (inserted) {
      p.pairs.push_back({a, b, l.slowdown, 0});
      p.pairs_of_node[a].push_back(it->second);
      p.pairs_of_node[b].push_back(it->second);
    } else {
      p.pairs[it->second].slowdown = std::max(p.pairs[it->second].slowdown, l.slowdown);
    }
  }
  for (Problem::Pair& pair : p.pairs) pair.weight = std::llround(pair.slowdown * 1000.0);
  return p;
}

// (penalty, straggler stages, concentration, stragglers in end stages, bytes, stage moves,
// dp moves): smaller is better.
using Key = std::tuple<int64_t, int, int64_t, int, int64_t, int, int>;

class Search {
 public:
  Search(const Problem& p, const TopologyCostModel& model, bool links, bool stragglers)
      : p_(p), links_(links), stragglers_(stragglers) {
    stage_bytes_ = model.stage_state_bytes_per_rank * p.tp;
    dp_bytes_ = model.dp_state_bytes_per_rank * p.tp;
    min_straggler_stages_ = (p.slow_units + p.dp - 1) / p.dp;
    slot_of_.resize(p.units());
    unit_at_.resize(p.units());
    for (int u = 0; u < p.units(); ++u) slot_of_[u] = unit_at_[u] = u;
    count_.assign(static_cast<size_t>(p.nodes()) * p.pp, 0);
    slow_count_.assign(p.pp, 0);
    mark_.assign(p.pp, 0);
    for (int u = 0; u < p.units(); ++u) Place(u, +1);
    pair_penalty_.assign(p.pairs.size(), 0);
    for (size_t i = 0; i < p.pairs.size(); ++i) {
      pair_penalty_[i] = PairPenalty(static_cast<int>(i));
      penalty_ += pair_penalty_[i];
    }
    for (int u = 0; u < p.units(); ++u) {
      if (p.unit_slowdown[u] > 1.0 || !p.pairs_of_node[p.unit_node[u]].empty()) {
        involved_units_.push_back(u);
      }
    }
    std::vector<bool> node_involved(p.nodes(), false);
    for (int u : involved_units_) node_involved[p.unit_node[u]] = true;
    for (int x = 0; x < p.nodes(); ++x) {
      if (node_involved[x]) involved_nodes_.push_back(x);
    }
    is_involved_.assign(p.units(), false);
    for (int u : involved_units_) is_involved_[u] = true;
  }

  // Best-improvement local search; stops at a local minimum or after `max_steps` moves.
  void Run(int max_steps) {
    for (int step = 0; step < max_steps; ++step) {
      const Key current = key();
      Key best = current;
      std::vector<std::pair<int, int>> best_move;
      std::vector<std::pair<int, int>> move;
      auto consider = [&]() {
        Apply(move);
        const Key k = key();
        Apply(move);  // swaps are involutions
        if (k < best) {
          best = k;
          best_move = move;
        }
      };
      absl::flat_hash_set<Signature> seen;
      for (int u : involved_units_) {
        seen.clear();
        for (int v = 0; v < p_.units(); ++v) {
          if (v == u || (is_involved_[v] && v < u)) continue;
          // Swaps with uninvolved units that share a signature score the same; scanning only
          // the first of each keeps the result identical to a full scan.
          if (!is_involved_[v] && !seen.insert(SignatureOf(u, v)).second) continue;
          move.assign(1, {u, v});
          consider();
        }
      }
      for (int x : involved_nodes_) {
        for (int y = 0; y < p_.nodes(); ++y) {
          if (y == x || p_.units_on_node[y].size() != p_.units_on_node[x].size()) continue;
          if (y < x && std::binary_search(involved_nodes_.begin(), involved_nodes_.end(), y)) {
            continue;
          }
          NodeSwap(x, y, &move);
          consider();
        }
      }
      if (best_move.empty()) return;
      Apply(best_move);
    }
  }

  Key key() const {
    const bool above_min = straggler_stages_ > min_straggler_stages_;
    return {links_ ? penalty_ : 0,
            stragglers_ ? straggler_stages_ : 0,
            stragglers_ && above_min ? -straggler_squares_ : 0,
            stragglers_ ? stragglers_at_ends_ : 0,
            bytes_,
            stage_moves_,
            dp_moves_};
  }

  const std::vector<int>& unit_at() const { return unit_at_; }
  int64_t bytes() const { return bytes_; }

 private:
  // What decides the key of swapping involved unit u with an uninvolved unit v (one that is
  // healthy and on a node without slow links): the stage of v's slot b, whether u would leave its
  // original stage / dp there, the slow-link nodes next to b in its pipeline after the swap, and
  // whether v would leave its original stage / dp at u's slot a.
  using Signature = std::tuple<int, bool, bool, int, int, bool, bool>;
  Signature SignatureOf(int u, int v) const {
    const int a = slot_of_[u], b = slot_of_[v];
    auto neighbour = [&](int slot) {
      if (slot == a) return -1;  // v will be there, on a node without slow links
      const int node = p_.unit_node[unit_at_[slot]];
      return p_.pairs_of_node[node].empty() ? -1 : node;
    };
    const int s = Stage(b);
    return {s,
            s == Stage(u),
            Dp(b) == Dp(u),
            s > 0 ? neighbour(b - 1) : -2,
            s + 1 < p_.pp ? neighbour(b + 1) : -2,
            Stage(a) == Stage(v),
            Dp(a) == Dp(v)};
  }

  int Stage(int slot) const { return slot % p_.pp; }
  int Dp(int slot) const { return slot / p_.pp; }
  bool IsEnd(int stage) const { return p_.pp >= 3 && (stage == 0 || stage == p_.pp - 1); }

  // Adds (+1) or removes (−1) unit u at its current slot from the incremental counters.
  void Place(int u, int sign) {
    const int slot = slot_of_[u];
    const int s = Stage(slot);
    count_[static_cast<size_t>(p_.unit_node[u]) * p_.pp + s] += sign;
    if (p_.unit_slowdown[u] > 1.0) {
      int& c = slow_count_[s];
      if (sign > 0) {
        straggler_squares_ += 2 * c + 1;
        if (c++ == 0) ++straggler_stages_;
      } else {
        straggler_squares_ -= 2 * c - 1;
        if (--c == 0) --straggler_stages_;
      }
      if (IsEnd(s)) stragglers_at_ends_ += sign;
    }
    if (Stage(slot) != Stage(u)) {
      bytes_ += sign * stage_bytes_;
      stage_moves_ += sign;
    } else if (Dp(slot) != Dp(u)) {
      bytes_ += sign * dp_bytes_;
      dp_moves_ += sign;
    }
  }

  void SwapUnits(int u, int v) {
    Place(u, -1);
    Place(v, -1);
    std::swap(slot_of_[u], slot_of_[v]);
    unit_at_[slot_of_[u]] = u;
    unit_at_[slot_of_[v]] = v;
    Place(u, +1);
    Place(v, +1);
  }

  // Swaps each listed pair of units, then refreshes the penalties of links at their nodes.
  void Apply(const std::vector<std::pair<int, int>>& move) {
    for (const auto& [u, v] : move) SwapUnits(u, v);
    const int x = p_.unit_node[move.front().first];
    const int y = p_.unit_node[move.front().second];
    for (int node : {x, y}) {
      for (int pair : p_.pairs_of_node[node]) {
        penalty_ -= pair_penalty_[pair];
        pair_penalty_[pair] = PairPenalty(pair);
        penalty_ += pair_penalty_[pair];
      }
    }
  }

  // The units of nodes x and y paired in order of their current slots.
  void NodeSwap(int x, int y, std::vector<std::pair<int, int>>* move) const {
    std::vector<int> a = p_.units_on_node[x], b = p_.units_on_node[y];
    auto by_slot = [this](int l, int r) { return slot_of_[l] < slot_of_[r]; };
    std::sort(a.begin(), a.end(), by_slot);
    std::sort(b.begin(), b.end(), by_slot);
    move->clear();
    for (size_t i = 0; i < a.size(); ++i) move->push_back({a[i], b[i]});
  }

  int64_t PairPenalty(int pair_index) {
    const Problem::Pair& pair = p_.pairs[pair_index];
    ++generation_;
    int64_t dp_shared = 0, pp_hops = 0;
    for (int u : p_.units_on_node[pair.a]) {
      const int slot = slot_of_[u];
      const int s = Stage(slot);
      if (mark_[s] != generation_) {
        mark_[s] = generation_;
        if (count_[static_cast<size_t>(pair.b) * p_.pp + s] > 0) ++dp_shared;
      }
      if (s > 0 && p_.unit_node[unit_at_[slot - 1]] == pair.b) ++pp_hops;
      if (s + 1 < p_.pp && p_.unit_node[unit_at_[slot + 1]] == pair.b) ++pp_hops;
    }
    return pair.weight * (kDpWeight * dp_shared + pp_hops);
  }

  const Problem& p_;
  const bool links_;
  const bool stragglers_;
  int64_t stage_bytes_ = 0;
  int64_t dp_bytes_ = 0;
  int min_straggler_stages_ = 0;
  std::vector<int> slot_of_;  // unit → slot
  std::vector<int> unit_at_;  // slot → unit
  std::vector<int> count_;    // node·P + stage → units of the node in the stage
  std::vector<int> slow_count_;
  std::vector<int> mark_;
  int generation_ = 0;
  std::vector<int64_t> pair_penalty_;
  int64_t penalty_ = 0;
  int straggler_stages_ = 0;
  int64_t straggler_squares_ = 0;
  int stragglers_at_ends_ = 0;
  int64_t bytes_ = 0;
  int stage_moves_ = 0;
  int dp_moves_ = 0;
  std::vector<int> involved_units_;
  std::vector<bool> is_involved_;
  std::vector<int> involved_nodes_;  // ascending
};

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
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batches: must be >= 1, got ", micro_batches));
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

}  // namespace falcon::analysis
