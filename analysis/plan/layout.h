// The hybrid-parallel layout of a job: rank → (dp, pp, tp) and rank → node. The one layout type of
// Falcon: the S3 planner reads one and writes a new one, the controller and the trainer exchange it
// as a complete assignment (TopologyChange), and the reference trainer runs on one.
//
// Invariants (checked by Layout::Create): ranks are 0..W−1, each once; every (dp, pp, tp) cell of
// the D × P × T grid is held by exactly one rank, so W = D·P·T; every TP group (the T ranks of a
// (dp, pp) cell) sits on one node. Nodes are named for every rank or for none: a layout without
// nodes is the trainer's view (S3 moves grid positions between rank processes; the processes never
// change hosts, so the trainer needs no host names). Immutable and thread-safe after creation.
#ifndef FALCON_ANALYSIS_PLAN_LAYOUT_H_
#define FALCON_ANALYSIS_PLAN_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::analysis::plan {

struct RankPlacement {
  int32_t rank = 0;  // Global rank, [0, W).
  std::string node;  // Node (host) name; empty for every rank of a layout without nodes.
  int32_t dp = 0;    // Data-parallel replica index, [0, D).
  int32_t pp = 0;    // Pipeline stage index, [0, P).
  int32_t tp = 0;    // Tensor-parallel index, [0, T).

  friend bool operator==(const RankPlacement& a, const RankPlacement& b) {
    return a.rank == b.rank && a.node == b.node && a.dp == b.dp && a.pp == b.pp && a.tp == b.tp;
  }
};

class Layout {
 public:
  // An empty layout (world_size() == 0); use Create for a real one.
  Layout() = default;

  // Validates and indexes `ranks` (any order). D, P and T are one more than the largest dp, pp and
  // tp. kInvalidArgument naming the entry ("ranks[i] (rank r).field: ...") when a rank is out of
  // range or repeated, a node is empty, an index is negative, a grid cell is missing or taken
  // twice, or a TP group spans nodes.
  static absl::StatusOr<Layout> Create(std::vector<RankPlacement> ranks);

  // The default placement of `world` ranks as dp × pp (tp 1, no nodes), after Megatron-LM with the
  // pipeline outermost: rank r sits at dp = r mod D, pp = r div D, so the ranks of one stage are
  // consecutive. kInvalidArgument naming all three when dp or pp < 1 or dp · pp != world.
  static absl::StatusOr<Layout> Default(int world, int dp, int pp);

  int world_size() const { return static_cast<int>(ranks_.size()); }
  int dp_size() const { return dp_size_; }
  int pp_size() const { return pp_size_; }
  int tp_size() const { return tp_size_; }

  // Every rank, sorted by rank.
  const std::vector<RankPlacement>& ranks() const { return ranks_; }
  // REQUIRES: 0 <= rank < world_size().
  const RankPlacement& at(int rank) const { return ranks_[rank]; }
  // The rank at a grid cell. REQUIRES: indices in range.
  int RankAt(int dp, int pp, int tp) const {
    return grid_[(static_cast<size_t>(dp) * pp_size_ + pp) * tp_size_ + tp];
  }
  // Node of the TP group at (dp, pp).
  const std::string& NodeAt(int dp, int pp) const { return ranks_[RankAt(dp, pp, 0)].node; }
  // The ranks of pipeline `dp` ordered by stage, and of stage `pp` ordered by DP index (tp 0).
  std::vector<int> PipelineRanks(int dp) const;
  std::vector<int> StageRanks(int pp) const;
  // "DP=2 x PP=2 x TP=1 [r0:(0,0,0) r1:(1,0,0) ...]" (node names, when set, after '@').
  std::string ToString() const;

  friend bool operator==(const Layout& a, const Layout& b) { return a.ranks_ == b.ranks_; }

 private:
  std::vector<RankPlacement> ranks_;
  std::vector<int> grid_;  // (dp·P + pp)·T + tp → rank
  int dp_size_ = 0;
  int pp_size_ = 0;
  int tp_size_ = 0;
};

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_LAYOUT_H_
