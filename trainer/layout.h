// The hybrid-parallel layout of a training job: DP groups x PP stages, which global rank holds
// which (dp, pp) position, and how the M micro-batches of a global batch are split across DP groups
// (the S2 micro-batch plan, docs/algorithms.md#s2-micro-batch-solver).
//
// Default placement follows Megatron-LM (PP outermost): rank r sits at dp = r % D, pp = r / D, so
// the ranks of one PP stage are consecutive (as in the FALCON paper's §5 topology example,
// nodes (0,0), (1,0), (0,1), (1,1)). S3 topology changes replace it with any bijection ranks <-> D
// x P grid.
//
// Value type; thread-compatible.
#ifndef FALCON_TRAINER_LAYOUT_H_
#define FALCON_TRAINER_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer {

struct RankPosition {
  int dp = 0;  // DP group (model replica) index, [0, D).
  int pp = 0;  // Pipeline stage index, [0, P).
  bool operator==(const RankPosition& o) const { return dp == o.dp && pp == o.pp; }
  bool operator!=(const RankPosition& o) const { return !(*this == o); }
};

class Layout {
 public:
  // The default placement of `world` ranks as dp x pp. kInvalidArgument when dp or pp < 1 or
  // dp * pp != world (the message names all three).
  static absl::StatusOr<Layout> Default(int world, int dp, int pp);
  // A layout from explicit positions (index = global rank). kInvalidArgument when a position is
  // outside dp x pp or two ranks share one, naming the ranks.
  static absl::StatusOr<Layout> FromPositions(int dp, int pp, std::vector<RankPosition> positions);
  // The layout an S3 TopologyChange describes for `world` ranks: one assignment per rank, the
  // (dp, pp) indices filling a full D' x P' grid with D' * P' == world, tp_index 0.
  // kInvalidArgument naming the offending assignment.
  static absl::StatusOr<Layout> FromTopologyChange(const falcon::v1::TopologyChange& change,
                                                   int world);

  int world() const { return static_cast<int>(positions_.size()); }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  RankPosition PositionOf(int rank) const { return positions_[rank]; }
  int RankAt(int dp, int pp) const { return ranks_[dp * pp_ + pp]; }
  // Global ranks of DP group `dp` ordered by stage, and of stage `pp` ordered by DP index.
  std::vector<int> PipelineRanks(int dp) const;
  std::vector<int> StageRanks(int pp) const;
  // "DP=2 x PP=2 [r0:(0,0) r1:(1,0) ...]".
  std::string ToString() const;
  bool operator==(const Layout& o) const {
    return dp_ == o.dp_ && pp_ == o.pp_ && positions_ == o.positions_;
  }

 private:
  Layout(int dp, int pp, std::vector<RankPosition> positions);
  int dp_ = 1;
  int pp_ = 1;
  std::vector<RankPosition> positions_;  // By global rank.
  std::vector<int> ranks_;               // By dp * pp_ + pp.
};

// Checks a job configuration before any rank starts: dp, pp >= 1, dp * pp == world,
// microbatches >= pp and a multiple of pp (1F1B: every DP group gets a multiple of PP),
// pp <= num_blocks (every stage holds at least one block). kInvalidArgument naming the flag.
absl::Status ValidateParallelConfig(int world, int dp, int pp, int microbatches, int num_blocks);

// The even split of `microbatches` (a multiple of pp) over `dp` groups in chunks of pp: every
// group gets floor(chunks / dp) chunks and the first chunks % dp groups one more.
std::vector<int> EvenMicroBatchPlan(int dp, int pp, int microbatches);

// Checks an S2 plan: one entry per DP group, each >= 0 and a multiple of pp, summing to
// `microbatches`. kInvalidArgument naming the entry.
absl::Status ValidateMicroBatchPlan(const std::vector<int>& plan, int dp, int pp, int microbatches);

// Index of the first global micro-batch of DP group `dp` under `plan` (sum of earlier entries):
// group d runs global micro-batches [offset, offset + plan[d]).
int MicroBatchOffset(const std::vector<int>& plan, int dp);

}  // namespace falcon::trainer

#endif  // FALCON_TRAINER_LAYOUT_H_
