#include "analysis/plan/topology_search.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace falcon::analysis::plan::topology_internal {
namespace {

constexpr int64_t kDpWeight = 1024;  // a DP stage over a slow link outweighs any PP hops
constexpr double kMaxSlowdown = 1000.0;

absl::Status CheckSlowdown(double slowdown, const std::string& field) {
  if (!(slowdown >= 1.0 && slowdown <= kMaxSlowdown)) {  // also rejects NaN
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be in [1, ", kMaxSlowdown, "], got ", slowdown));
  }
  return absl::OkStatus();
}

}  // namespace

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

Search::Search(const Problem& p, const TopologyCostModel& model, bool links, bool stragglers)
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
void Search::Run(int max_steps) {
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
Search::Signature Search::SignatureOf(int u, int v) const {
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
void Search::Place(int u, int sign) {
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
void Search::SwapUnits(int u, int v) {
  Place(u, -1);
  Place(v, -1);
  std::swap(slot_of_[u], slot_of_[v]);
  unit_at_[slot_of_[u]] = u;
  unit_at_[slot_of_[v]] = v;
  Place(u, +1);
  Place(v, +1);
}
void Search::Apply(const std::vector<std::pair<int, int>>& move) {
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
void Search::NodeSwap(int x, int y, std::vector<std::pair<int, int>>* move) const {
  std::vector<int> a = p_.units_on_node[x], b = p_.units_on_node[y];
  auto by_slot = [this](int l, int r) { return slot_of_[l] < slot_of_[r]; };
  std::sort(a.begin(), a.end(), by_slot);
  std::sort(b.begin(), b.end(), by_slot);
  move->clear();
  for (size_t i = 0; i < a.size(); ++i) move->push_back({a[i], b[i]});
}
int64_t Search::PairPenalty(int pair_index) {
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
}  // namespace falcon::analysis::plan::topology_internal
