#include "analysis/plan/layout.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace falcon::analysis::plan {

absl::StatusOr<Layout> Layout::Create(std::vector<RankPlacement> ranks) {
  if (ranks.empty()) return absl::InvalidArgumentError("ranks: empty layout");
  const int world = static_cast<int>(ranks.size());
  std::vector<int> entry_of_rank(world, -1);
  int dp = 0, pp = 0, tp = 0;
  for (int i = 0; i < world; ++i) {
    const RankPlacement& r = ranks[i];
    const std::string where = absl::StrCat("ranks[", i, "] (rank ", r.rank, ")");
    if (r.rank < 0 || r.rank >= world) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".rank: must be in [0, ", world, ") for ", world, " ranks"));
    }
    if (entry_of_rank[r.rank] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".rank: repeats ranks[", entry_of_rank[r.rank], "]"));
    }
    entry_of_rank[r.rank] = i;
    if (r.node.empty() != ranks[0].node.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".node: ", r.node.empty() ? "empty" : "set", " while ranks[0] has ",
          ranks[0].node.empty() ? "none" : "one", " (nodes are named for every rank or for none)"));
    }
    const std::pair<const char*, int32_t> indices[] = {{"dp", r.dp}, {"pp", r.pp}, {"tp", r.tp}};
    for (const auto& [name, value] : indices) {
      if (value < 0 || value >= world) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", name, ": must be in [0, ", world, "), got ", value));
      }
    }
    dp = std::max(dp, r.dp + 1);
    pp = std::max(pp, r.pp + 1);
    tp = std::max(tp, r.tp + 1);
  }
  if (static_cast<int64_t>(dp) * pp * tp != world) {
    return absl::InvalidArgumentError(absl::StrCat("ranks: ", world, " ranks do not fill the ", dp,
                                                   " (dp) x ", pp, " (pp) x ", tp, " (tp) grid"));
  }
  Layout layout;
  layout.dp_size_ = dp;
  layout.pp_size_ = pp;
  layout.tp_size_ = tp;
  layout.grid_.assign(world, -1);
  for (int i = 0; i < world; ++i) {
    const RankPlacement& r = ranks[i];
    int& cell = layout.grid_[(static_cast<size_t>(r.dp) * pp + r.pp) * tp + r.tp];
    if (cell >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("ranks[", i, "] (rank ", r.rank,
                                                     "): cell (dp ", r.dp, ", pp ", r.pp, ", tp ",
                                                     r.tp, ") is also held by rank ", cell));
    }
    cell = r.rank;
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const RankPlacement& a, const RankPlacement& b) { return a.rank < b.rank; });
  layout.ranks_ = std::move(ranks);
  for (int d = 0; d < dp; ++d) {
    for (int s = 0; s < pp; ++s) {
      const std::string& node = layout.NodeAt(d, s);
      for (int t = 1; t < tp; ++t) {
        const RankPlacement& r = layout.ranks_[layout.RankAt(d, s, t)];
        if (r.node != node) {
          return absl::InvalidArgumentError(
              absl::StrCat("ranks[", entry_of_rank[r.rank], "] (rank ", r.rank,
                           ").node: TP group (dp ", d, ", pp ", s, ") spans nodes ", node, " and ",
                           r.node, "; TP groups must stay inside a node"));
        }
      }
    }
  }
  return layout;
}

absl::StatusOr<Layout> Layout::Default(int world, int dp, int pp) {
  if (dp < 1 || pp < 1 || static_cast<int64_t>(dp) * pp != world) {
    return absl::InvalidArgumentError(absl::StrCat("layout DP=", dp, " x PP=", pp, " needs ",
                                                   static_cast<int64_t>(dp) * pp,
                                                   " ranks but the world has ", world));
  }
  std::vector<RankPlacement> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = RankPlacement{r, "", r % dp, r / dp, 0};
  return Create(std::move(ranks));
}

std::vector<int> Layout::PipelineRanks(int dp) const {
  std::vector<int> out;
  for (int s = 0; s < pp_size_; ++s) out.push_back(RankAt(dp, s, 0));
  return out;
}

std::vector<int> Layout::StageRanks(int pp) const {
  std::vector<int> out;
  for (int d = 0; d < dp_size_; ++d) out.push_back(RankAt(d, pp, 0));
  return out;
}

std::string Layout::ToString() const {
  std::string out = absl::StrCat("DP=", dp_size_, " x PP=", pp_size_, " x TP=", tp_size_, " [");
  for (const RankPlacement& r : ranks_) {
    absl::StrAppend(&out, r.rank ? " " : "", "r", r.rank, ":(", r.dp, ",", r.pp, ",", r.tp, ")",
                    r.node.empty() ? "" : "@", r.node);
  }
  return out + "]";
}

}  // namespace falcon::analysis::plan
