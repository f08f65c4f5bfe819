// S3: changing the parallelism topology (docs/algorithms.md#s3-topology-planner). Given the job
// layout (rank → (dp, pp, tp) and rank → node), the slow links and the slow ranks that validation
// found, produces a complete new rank → (dp, pp, tp) assignment that
//   (a) takes congested links out of DP communicators (heavy gradient traffic, Θ(h²)) and
//       leaves them carrying at most light PP traffic (Θ(h)) or nothing, as in the paper's
//       node swap;
//   (b) packs the straggling TP groups into as few PP stages as possible, ⌈#slow groups / D⌉,
//       preferring interior stages (the first and last stages carry embedding and loss work);
// together with the 1F1B cost model's predicted iteration time before and after, and the bytes of
// state the ranks must exchange.
//
// What moves: whole TP groups. TP stays inside a node, so a TP group (the T ranks of one
// (dp, pp) cell) keeps its node and its ranks keep their tp index; the planner permutes which
// (dp, pp) cell each TP group holds. A slow link is a pair of nodes: congestion sits on the path
// between two hosts, and after a remap other ranks of those hosts use it.
//
// Traffic model: two nodes exchange DP traffic when both host a TP group of the same stage (a DP
// all-reduce may use any pair of its members: ring or tree); PP traffic when they host TP groups
// at adjacent stages of the same replica. A stage's DP all-reduce is as slow as its slowest link;
// a PP boundary's p2p time grows with its link's slowdown; a TP group computes at the pace of its
// slowest rank.
//
// Search: deterministic best-improvement local search over swaps of two TP groups and swaps of
// two whole nodes' TP groups (the paper's node swap), minimising lexicographically
//   1. the congestion penalty Σ_links w·(1024·#stages sharing it as DP + #PP hops over it);
//   2. the number of PP stages holding stragglers; while above ⌈#slow groups / D⌉ also
//      −Σ (stragglers per stage)², which rewards concentration; then stragglers in end stages;
//   3. bytes of state to move, then TP groups that change stage, then TP groups that change dp.
// It runs with (1)+(2), (1) only and (2) only, and returns the candidate the cost model predicts
// fastest (ties: fewer bytes, fewer moves). When no candidate beats the current layout, the
// current layout is returned unchanged with a note. S3 is not claimed optimal: it is a heuristic
// that follows the paper's two rules and never returns a layout predicted slower.
//
// Pure functions; thread-compatible.
#ifndef FALCON_ANALYSIS_PLAN_TOPOLOGY_PLANNER_H_
#define FALCON_ANALYSIS_PLAN_TOPOLOGY_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/plan/layout.h"
#include "analysis/plan/pipeline_cost.h"

namespace falcon::analysis::plan {

// A link that validation measured as slow. Direction does not matter.
struct SlowLink {
  int32_t src_rank = 0;
  int32_t dst_rank = 0;
  double slowdown = 2.0;  // Measured time / healthy time on the link, in [1, 1000].
};

// A rank that validation measured as slow (compute).
struct SlowRank {
  int32_t rank = 0;
  double slowdown = 1.5;  // Measured compute time / healthy, in [1, 1000].
};

// Upper bound of TopologyCostModel::micro_batches. With every time at its bound (1 h, slowdown
// 1000) an iteration stays far inside absl::Duration's finite range.
inline constexpr int64_t kMaxReplicaMicroBatches = 1'000'000;

// Inputs of the 1F1B cost model (pipeline_cost.h) for a healthy job, and state sizes.
struct TopologyCostModel {
  // Micro-batches per replica per iteration, in [1, kMaxReplicaMicroBatches]. Default 8.
  int64_t micro_batches = 8;
  // Forward + backward time of one micro-batch per stage: one entry (every stage) or P entries.
  std::vector<absl::Duration> stage_compute = {absl::Seconds(1)};
  // Healthy one-way p2p time of one micro-batch across a PP boundary. Default 20 ms.
  absl::Duration p2p = absl::Milliseconds(20);
  // Healthy DP all-reduce time of one stage's gradients. Default 1 s.
  absl::Duration allreduce = absl::Seconds(1);
  // State a rank holds for its stage (parameters + optimizer), moved when its stage changes.
  int64_t stage_state_bytes_per_rank = 0;
  // State tied to a rank's dp index within its stage (e.g. ZeRO shards), moved when only its dp
  // index changes. Default 0 (plain DP replicas are identical).
  int64_t dp_state_bytes_per_rank = 0;

  // kInvalidArgument naming the field when a value is out of range for a job with `pp` stages.
  absl::Status Validate(int pp) const;
};

struct TopologyPlannerOptions {
  TopologyCostModel model;
  bool move_links = true;              // rule (a)
  bool consolidate_stragglers = true;  // rule (b)
  int max_steps = 0;                   // improving moves per search; 0 = 4·(D·P) + 16
};

struct TopologyPlan {
  Layout layout;             // The complete new assignment (equal to the input when nothing helps).
  IterationEstimate before;  // Cost model on the input layout with the slow parts.
  IterationEstimate after;   // ... and on the new layout.
  int64_t bytes_to_move = 0;         // Σ over moved ranks of the state they must receive.
  std::vector<int32_t> moved_ranks;  // Ranks whose (dp, pp) changed, ascending.
  int ranks_changing_stage = 0;      // Of those, ranks whose pp changed.
  // Slow node pairs (inter-node) that carry DP traffic / PP traffic, before and after.
  int slow_links_in_dp_before = 0;
  int slow_links_in_dp_after = 0;
  int slow_links_in_pp_before = 0;
  int slow_links_in_pp_after = 0;
  // PP stages that hold at least one straggling TP group, before and after.
  int straggler_stages_before = 0;
  int straggler_stages_after = 0;
  std::vector<std::string> notes;  // Human-readable remarks (ignored inputs, why no change).
};

// Plans S3. kInvalidArgument naming the field for a bad model, a rank out of range, a link from a
// rank to itself, or a slowdown outside [1, 1000]. Links inside one node are ignored with a note
// (S3 cannot move them).
absl::StatusOr<TopologyPlan> PlanTopology(const Layout& layout,
                                          const std::vector<SlowLink>& slow_links,
                                          const std::vector<SlowRank>& slow_ranks,
                                          const TopologyPlannerOptions& options);

// The cost model's view of `layout` with the slow parts: the JobTiming that EstimateIteration
// takes. Same errors as PlanTopology.
absl::StatusOr<JobTiming> LayoutTiming(const Layout& layout,
                                       const std::vector<SlowLink>& slow_links,
                                       const std::vector<SlowRank>& slow_ranks,
                                       const TopologyCostModel& model);

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_TOPOLOGY_PLANNER_H_
