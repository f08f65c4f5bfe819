// Internal to the S3 planner (topology_planner.h): the job reduced to TP groups and nodes, and
// the deterministic local search over TP-group and node swaps. Not part of the public API.
// Not thread-safe; one search per thread.
#ifndef FALCON_ANALYSIS_PLAN_TOPOLOGY_SEARCH_H_
#define FALCON_ANALYSIS_PLAN_TOPOLOGY_SEARCH_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "analysis/plan/layout.h"
#include "analysis/plan/topology_planner.h"

namespace falcon::analysis::plan::topology_internal {

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

// Validates the slow parts against `layout` (errors name slow_links[i] / slow_ranks[i]) and
// builds the problem. Intra-node links are dropped with a note.
absl::StatusOr<Problem> BuildProblem(const Layout& layout, const std::vector<SlowLink>& links,
                                     const std::vector<SlowRank>& ranks);

// (penalty, straggler stages, concentration, stragglers in end stages, bytes, stage moves,
// dp moves): smaller is better. See topology_planner.h for the objective.
using Key = std::tuple<int64_t, int, int64_t, int, int64_t, int, int>;

// Local search over slot assignments, starting from the input layout (unit u at slot u).
// `links` / `stragglers` select which parts of the objective count.
class Search {
 public:
  Search(const Problem& p, const TopologyCostModel& model, bool links, bool stragglers);

  // Best-improvement local search; stops at a local minimum or after `max_steps` moves.
  void Run(int max_steps);

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

  const std::vector<int>& unit_at() const { return unit_at_; }  // slot → unit
  int64_t bytes() const { return bytes_; }

 private:
  // What decides the key of swapping involved unit u with an uninvolved unit v (one that is
  // healthy and on a node without slow links): the stage of v's slot b, whether u would leave its
  // original stage / dp there, the slow-link nodes next to b in its pipeline after the swap, and
  // whether v would leave its original stage / dp at u's slot a.
  using Signature = std::tuple<int, bool, bool, int, int, bool, bool>;
  Signature SignatureOf(int u, int v) const;

  int Stage(int slot) const { return slot % p_.pp; }
  int Dp(int slot) const { return slot / p_.pp; }
  bool IsEnd(int stage) const { return p_.pp >= 3 && (stage == 0 || stage == p_.pp - 1); }

  // Adds (+1) or removes (−1) unit u at its current slot from the incremental counters.
  void Place(int u, int sign);
  void SwapUnits(int u, int v);
  // Swaps each listed pair of units, then refreshes the penalties of links at their nodes.
  void Apply(const std::vector<std::pair<int, int>>& move);
  // The units of nodes x and y paired in order of their current slots.
  void NodeSwap(int x, int y, std::vector<std::pair<int, int>>* move) const;
  int64_t PairPenalty(int pair_index);

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

}  // namespace falcon::analysis::plan::topology_internal

#endif  // FALCON_ANALYSIS_PLAN_TOPOLOGY_SEARCH_H_
