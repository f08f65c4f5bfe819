// Planning for mitigation, shared by the orchestrator (orchestrator.h) and the
// Control API's DryRunPlan: a job's shape from its registration, the S2 micro-batch plan
// (analysis/plan/micro_batch_solver.h, docs/algorithms.md#s2-micro-batch-solver), the S2L layer
// split (analysis/plan/layer_split_planner.h, docs/algorithms.md#layer-split-planner), the S3
// topology change (analysis/plan/topology_planner.h, docs/algorithms.md#s3-topology-planner), the
// recoverable ceiling of each plan (Event.ceiling, docs/algorithms.md#recoverable-ceiling) and
// the escalation ladder with its costs (docs/algorithms.md#escalation).
//
// The cost model (analysis/plan/pipeline_cost.h, 1F1B) is calibrated from the healthy job
// iteration time: with an even split of m micro-batches per replica over P stages, healthy ≈
// (m + P − 1)·c, which gives the per-stage compute c of one micro-batch. A compute culprit's
// stage slowdown s is derived from the job's slowdown ratio r (slow / healthy iteration time):
// one stage slowed by s gives slow ≈ (P − 1)·c + m·s·c, so s = 1 + (r − 1)·(m + P − 1)/m.
// S2L spreads c over the blocks a stage holds: each of the L blocks computes c·P/L per
// micro-batch (embedding, head and transfers are not modelled).
// Pure functions; thread-compatible.
#ifndef FALCON_CONTROLLER_MITIGATION_PLANNER_H_
#define FALCON_CONTROLLER_MITIGATION_PLANNER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/plan/escalation.h"
#include "analysis/plan/layout.h"
#include "common/layer_split.h"
#include "controller/registry/job_registry.h"
#include "controller/settings/settings_manager.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::mitigation {

// What a verdict (or a hypothetical one) names.
struct Culprit {
  falcon::v1::Cause cause = falcon::v1::CAUSE_UNKNOWN;
  std::vector<uint32_t> ranks;          // Compute culprits.
  std::vector<falcon::v1::Link> links;  // Communication culprits (with nodes: the evidence).
  // Communication: nodes whose NIC is slow (Event.nodes, docs/algorithms.md#node-nic-faults), and
  // every rank registered on them, ascending (CulpritOf). S3 treats every link between such a
  // node and another node as slow; S4 restarts without node_ranks.
  std::vector<std::string> nodes;
  std::vector<uint32_t> node_ranks;
  // Communication: the node of each end of a culprit link and every rank the job has on such a
  // node (CulpritOf; an end whose rank registered no node is absent), for S4 to leave out whole
  // nodes when it covers slow links.
  std::map<uint32_t, std::string> link_end_nodes;
  std::map<std::string, std::vector<uint32_t>> link_node_ranks;
  double slowdown_ratio = 1.0;  // Slow / healthy job iteration time, > 1.
  // A compute culprit's stage slowdown measured directly (its compute time per micro-batch over
  // its stage peers'); 0 = not measured, derive it from slowdown_ratio (StageSlowdown).
  double measured_stage_slowdown = 0;
};

// The culprit `event` names (cause, ranks, links, nodes), with the ranks `job` has on its nodes;
// slowdown_ratio from the event (at least 1).
Culprit CulpritOf(const falcon::v1::Event& event, const registry::JobEntry& job);
// Fills `culprit`'s link_end_nodes and link_node_ranks from `job`'s registration.
void FillLinkEnds(const registry::JobEntry& job, Culprit* culprit);
// Every rank `job` registered on one of `nodes`, ascending (Culprit::node_ranks).
std::vector<uint32_t> RanksOfNodes(const std::vector<std::string>& nodes,
                                   const registry::JobEntry& job);

// The job as the planners see it.
struct JobShape {
  analysis::plan::Layout layout;        // rank -> (dp, pp, tp) and node.
  int64_t global_micro_batches = 0;     // M.
  std::vector<uint32_t> micro_batches;  // Plan in force, per DP index (even split when none).
  // The model's pipeline (S2L): its blocks (layers between embedding and head; 0 unknown), the
  // bytes of state one block moves, and the split in force per DP index (empty: every pipeline
  // even; else D entries of P stage counts summing to pipeline_blocks).
  int pipeline_blocks = 0;
  int64_t block_state_bytes = 0;
  std::vector<common::StageBlocks> layer_split;
};

// The shape of `job`: `layout` when given (the layout in force after an S3), else the ranks'
// registered (dp_index, pp_index, tp_index); M from the registration (else dp × pp);
// `micro_batches` when it has one entry per DP index, else the even split; the pipeline's blocks
// and block state bytes as registered (Job, else the agents' registrations), and the layer split
// in force (Job.layer_split; empty unless it fits the layout and the blocks).
// kFailedPrecondition naming what is missing (layout indices, sizes) or inconsistent.
absl::StatusOr<JobShape> ShapeOf(const registry::JobEntry& job,
                                 const analysis::plan::Layout* layout,
                                 const std::vector<uint32_t>& micro_batches);

// Whether S2L can re-split the job's pipelines: P >= 2 and a known block count above P (at most
// common::kMaxPipelineBlocks).
bool Resplittable(const JobShape& shape);
// The layer split in force of every DP group: shape.layer_split, else each pipeline even (empty
// when the blocks are unknown).
std::vector<common::StageBlocks> SplitInForce(const JobShape& shape);

// The trainer's even split: M/P blocks of P micro-batches, the remainder to the lowest indices.
std::vector<uint32_t> EvenSplit(int64_t global_micro_batches, int dp, int pp);

// Stage slowdown of a compute culprit from the job's ratio (see above), in [1, 1000].
double StageSlowdown(double job_ratio, int64_t micro_batches_per_replica, int pp);
// The culprit's measured stage slowdown when it has one (> 1), else StageSlowdown(...).
double CulpritStageSlowdown(const Culprit& culprit, int64_t micro_batches_per_replica, int pp);
// The share of a healthy iteration that is the pipeline's compute, which a slowdown stretches and
// a layer split moves, in [0.05, 1]; the rest (the DP all-reduce, the optimizer step) is a fixed
// cost per iteration. It is the job's slowdown as the culprit stage's whole 1F1B slot would take
// it (StageSlowdown of slowdown_ratio) over the stage slowdown the compute probe measured,
// (slot − 1) / (measured − 1): the pipeline of a healthy iteration t is (m + P − 1) slots c, and
// one stage slowed x s adds m·c·(s − 1) = t·(ratio − 1). A x1.85 compute slowdown that slows the
// job only x1.43 gives 0.54. 1 without a measured stage slowdown (the slowdown is then derived
// from the job's, the whole iteration). Used by the layer split model (S2L's plan, S2's and S2L's
// ceilings); S2's own plan is sized as the paper does, per slot.
double ComputeFraction(const Culprit& culprit, int64_t micro_batches_per_replica, int pp);

struct S2Plan {
  std::vector<uint32_t> micro_batches;  // Per DP index.
  double stage_slowdown = 1;            // The culprits' stage slowdown the plan is sized for.
  bool stage_slowdown_measured =
      false;                         // Measured (Culprit::measured_stage_slowdown), not derived.
  absl::Duration predicted;          // Iteration time under the plan (cost model).
  absl::Duration predicted_current;  // ... under the plan in force, with the culprits.
  bool improves = false;             // predicted < predicted_current by >= 2 %.
  std::string summary;               // E.g. "m = [2, 6, 4, 4] (was [4, 4, 4, 4])".
  // The plan's recoverable ceiling (from shape.micro_batches and the split in force); nullopt
  // when the model cannot evaluate it.
  std::optional<falcon::v1::PlanCeiling> ceiling;
};
// S2 for compute culprits. `others`: the culprits of the job's other active events
// (docs/algorithms.md#concurrent-events); their compute ranks slow their (dp, pp) cells by their
// own stage slowdown, so one plan accounts for every slow DP group. kFailedPrecondition when no
// culprit rank is in the layout.
absl::StatusOr<S2Plan> PlanS2(const JobShape& shape, const Culprit& culprit, absl::Duration healthy,
                              const std::vector<Culprit>& others = {});

// S2L: the layer split of every DP group's pipeline with the micro-batch plan that goes with it
// (analysis::plan::PlanLayerSplit on the model above: one block computes c·P/L, each (dp, pp)
// cell slowed as S2 slows it, q = 1, M the job's), planned from the split in force
// (shape.layer_split) and shape.micro_batches, for compute culprits of a Resplittable job. A
// replica whose split in force is no slower under the planned micro-batches keeps it.
struct S2LPlan {
  std::vector<common::StageBlocks> split;  // Per DP index, P stage counts each.
  std::vector<uint32_t> micro_batches;     // Per DP index, each >= 1, summing to M.
  double stage_slowdown = 1;               // The culprits' stage slowdown the plan is sized for.
  absl::Duration predicted;                // Iteration time under the plan (cost model).
  absl::Duration predicted_s2;             // ... under S2 alone (the split in force, q = P).
  absl::Duration predicted_current;        // ... under the plan it starts from.
  int blocks_moved = 0;                    // Σ over DP groups of the blocks changing stage.
  int64_t bytes_moved = 0;                 // blocks_moved × shape.block_state_bytes.
  // A block moves and predicted < 0.98 × predicted_s2 (else S2 alone does as well).
  bool improves = false;
  std::string summary;  // E.g. "split dp1 6+10 (was even), m = [...] (was [...]), ...".
  std::optional<falcon::v1::PlanCeiling> ceiling;  // As S2Plan's.
};
// kFailedPrecondition when the job is not Resplittable, no culprit rank is in the layout, or the
// planner refuses the problem (its message).
absl::StatusOr<S2LPlan> PlanS2L(const JobShape& shape, const Culprit& culprit,
                                absl::Duration healthy, const std::vector<Culprit>& others = {});

struct S3Plan {
  analysis::plan::Layout layout;      // The complete new layout.
  falcon::v1::TopologyChange change;  // ... as the directive carries it.
  absl::Duration predicted;
  absl::Duration predicted_current;
  bool improves = false;  // The layout changed and is predicted faster.
  std::string summary;    // Moves, slow links in DP before/after, notes.
  // The ceiling: the planner's estimates before/after, with the layout in force and no slowdown
  // as healthy; nullopt when the model cannot evaluate it.
  std::optional<falcon::v1::PlanCeiling> ceiling;
};
// S3: takes slow links out of DP (and PP) traffic, packs slow ranks into few stages;
// kFailedPrecondition while an uneven layer split is in force (shape.layer_split: its model's
// pipelines are even, and a move could take the slow rank off the stage the split shrank). A
// culprit node's links to every other node of the layout count as slow links (its NIC). `others`:
// the culprits of the job's other active events, whose links, nodes and compute ranks it avoids
// too.
absl::StatusOr<S3Plan> PlanS3(const JobShape& shape, const Culprit& culprit, absl::Duration healthy,
                              const std::vector<Culprit>& others = {});

// The complete assignment of `layout` (one entry per rank, tp_index as in the layout).
falcon::v1::TopologyChange ToTopologyChange(const analysis::plan::Layout& layout);

// Ranks S4 leaves out, ascending: the compute culprits; every rank of a culprit node
// (node_ranks); and for the links touching no culprit node, every rank of the nodes that cover
// them (S4LinkCover). None for another cause (an unknown verdict's ranks are those whose series
// slowed, not culprits).
std::vector<uint32_t> S4Excluded(const Culprit& culprit);
// The nodes S4 leaves out so that no slow link (of `culprit.links`, those touching no culprit
// node) remains: each link goes when one of its ends' nodes goes. Greedy set cover (Falcon's own
// rule; within a factor H(links) ≈ ln(links) + 1 of the fewest nodes), choosing in this order:
//   1. not the node holding rank 0 (a launcher's rendezvous host, as torchrun's static one:
//      falcon.launch cannot relaunch without it), unless a slow link lies wholly inside it;
//   2. the node touching the most uncovered links;
//   3. the one that receives more of them (the destination side: a capped direction also delays
//      the TCP acks of the other, so its reverse links may read slow too);
//   4. the one whose lowest rank (of every rank the job has on it) is higher.
// An end without a node counts as a node of its own rank. Node names ascending, a rank alone as
// "rank R". Links 0->2 and 0->4 (node0 = {0, 1}, ...) thus leave out node1 and node2, not node0.
std::vector<std::string> S4LinkCover(const Culprit& culprit);
// "restart without ranks [4, 5]", then in parentheses " (every rank of node node-2, its NIC)" for
// culprit nodes and "every rank of node node-1, at an end of the slow links" for a link cover,
// both joined by "; " when there are both.
std::string S4Summary(const Culprit& culprit);

// Where an event stands on its ladder, for DryRun.
struct LadderState {
  int64_t iteration = 0;  // The job's latest iteration: steps to come are projected from it.
  absl::Duration lost;    // Time lost so far (zero for a hypothetical verdict).
  struct Taken {
    int64_t iteration = 0;  // Where it happened (a directive's effective iteration).
    std::string what;       // "applied at iteration 96", "skipped at iteration 120: ...".
  };
  std::map<falcon::v1::Strategy, Taken> taken;  // Levels the event already took or skipped.
};

// DryRunPlan: the escalation ladder (S1 first, then each enabled candidate with the lost time
// that pays for it and why, "disabled" ones noted; S2L for a compute culprit of a Resplittable
// job, costing its plan's bytes over the bandwidth plus the pause: analysis::plan::S2LCost, with
// `s2l_measured` when the job's last S2L measured them, else the s2l_bandwidth_bytes_per_s and
// s2l_pause_seconds settings), the S2 / S2L / S3 plans when they apply, and the predicted iteration
// time under the first plan that improves. Each step's iteration is where `state` says it was
// taken, else where the lost time would pay for it: state.iteration + ceil((cost - state.lost) /
// Δt_iter). The S2 plan is computed from shape.micro_batches (the caller passes what S2 plans from:
// the plan an S2 in force replaced).
absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRun(
    const JobShape& shape, const settings::EffectiveSettings& settings, const Culprit& culprit,
    absl::Duration healthy, absl::Time now, const LadderState& state,
    const std::optional<analysis::plan::S2LMeasurement>& s2l_measured = {});

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_PLANNER_H_
