// Layer re-partition with micro-batch re-balancing (Falcon's own level between S2 and S3;
// docs/algorithms.md#layer-split-planner). S2 alone (micro_batch_solver.h) cannot recover much of
// a compute fail-slow: the slow GPU is one stage of its pipeline, and its whole replica runs at
// that stage's pace. Giving that stage fewer layers and its pipeline peers more (a non-uniform
// partition, as Malleus does) shrinks the replica's slowdown, and S2 then balances a much
// smaller gap.
//
// Model: the 1F1B cost model of pipeline_cost.h with per-layer compute. Stage s of replica d
// holding layers [a, b) spends, per micro-batch,
//   cycle_{d,s} = slowdown_{d,s} · Σ_{l in [a, b)} layer_compute_l + h_{s−1} + h_s,
// and replica d with m_d micro-batches takes T_d = Σ_s cycle_{d,s} + (m_d − 1)·max_s cycle_{d,s}.
// The iteration takes max_d T_d + `allreduce` (per-layer gradient all-reduces of layers that
// moved between stages of different replicas cost about what the stage all-reduce did; the term
// is a constant of the problem).
//
// The planner jointly chooses, for every replica, a contiguous split of the L layers into its P
// stages (each stage at least `min_layers_per_stage` layers and at most
// `stage_memory_limit_bytes` of per-layer memory) and the micro-batch counts m_d (Σ m_d = M, each
// a positive multiple of q) minimising the predicted iteration time. It is exact under the model:
//   1. For a replica, any split is a point (A, B) = (Σ cycle, max cycle), and
//      T_d(m) = A + (m − 1)·B. Only the Pareto front of (B, A) matters. It is enumerated exactly
//      by a dynamic program over (stage, layer) that minimises (A, then B) lexicographically under
//      a cap on B (a lexicographic (sum, max) objective has optimal substructure), re-run with the
//      cap just below the last point's B until no split fits: O(F·P·L²) for F front points.
//      Replicas with the same slowdowns share one front.
//   2. T_d(m) = min over the front of A + (m − 1)·B, non-decreasing in m. The optimal iteration
//      time is the least T among the finitely many T_d(m) for which every replica fits q
//      micro-batches within T and the largest counts within T sum to at least M (binary search).
//   3. Counts above M are taken back q at a time from the replica predicted to finish last.
// Times are whole nanoseconds: a cycle is rounded once, and every comparison is an integer one.
//
// Thread-compatible pure functions; no I/O.
#ifndef FALCON_ANALYSIS_PLAN_LAYER_SPLIT_PLANNER_H_
#define FALCON_ANALYSIS_PLAN_LAYER_SPLIT_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::analysis::plan {

// Sizes the planner accepts (keep the O(F·P·L²) front and every product inside int64 ns).
inline constexpr int kMaxSplitLayers = 4096;
inline constexpr int kMaxSplitStages = 256;
inline constexpr int kMaxSplitReplicas = 65536;

struct LayerSplitProblem {
  int dp = 0;  // D, in [1, kMaxSplitReplicas].
  int pp = 0;  // P, in [1, kMaxSplitStages].
  // Forward + backward compute of one micro-batch through each layer on a healthy GPU, in model
  // order (the first layer always sits on stage 0, the last on stage P − 1); L = size(), in
  // [P · min_layers_per_stage, kMaxSplitLayers]; each in [0, 1000 s].
  std::vector<absl::Duration> layer_compute;
  // Compute slowdown of each (dp, pp) cell (its slowest TP rank), dp-major: index d · P + s;
  // size D · P; each in [0.01, 1000] (1 = healthy).
  std::vector<double> slowdowns;
  // One-way transfer time of a micro-batch across boundary s → s+1 (h_s); size P − 1, or empty
  // for none; each in [0, 1000 s].
  std::vector<absl::Duration> boundary_p2p;
  // DP all-reduce time added once per iteration, >= 0.
  absl::Duration allreduce = absl::ZeroDuration();
  // M: micro-batches per global batch, a multiple of `multiple`, at least D · multiple, at most
  // 4,000,000.
  int64_t global_micro_batches = 0;
  // q: every m_d is a positive multiple of q (q = P under 1F1B), >= 1.
  int64_t multiple = 1;
  // Fewest layers a stage holds, >= 1.
  int min_layers_per_stage = 1;
  // Memory a stage needs per layer it holds (parameters, gradients, optimizer state and the
  // activations of its in-flight micro-batches): size L, or empty for no limit; each >= 0.
  std::vector<int64_t> layer_memory_bytes;
  // Most memory one stage may hold; 0: no limit. Needs layer_memory_bytes when > 0.
  int64_t stage_memory_limit_bytes = 0;
};

// A split of L layers into P stages: the first layer of each stage, ascending, first_layer[0] = 0.
using StageSplit = std::vector<int>;

struct ReplicaLayerPlan {
  StageSplit first_layer;              // size P.
  int64_t micro_batches = 0;           // m_d.
  absl::Duration pipeline;             // T_d.
  std::vector<absl::Duration> cycles;  // cycle_{d,s}, size P.
};

struct LayerSplitPlan {
  std::vector<ReplicaLayerPlan> replicas;  // one per DP index.
  absl::Duration iteration;                // max_d T_d + allreduce.
  int slowest_replica = 0;                 // argmax_d T_d (lowest index on ties).
  int64_t front_points = 0;                // Σ over distinct replica profiles of F (diagnostics).
};

// Checks the problem. kInvalidArgument naming the first bad field (e.g. "slowdowns[5]").
absl::Status ValidateLayerSplitProblem(const LayerSplitProblem& problem);

// The jointly optimal layer split of every replica and micro-batch counts (see above). Errors:
// as ValidateLayerSplitProblem; kFailedPrecondition when no split of some replica fits the memory
// limit.
absl::StatusOr<LayerSplitPlan> PlanLayerSplit(const LayerSplitProblem& problem);

// The optimal micro-batch counts with every replica's split fixed to `splits` (S2 alone when the
// splits are those in force). `splits`: size D, each a valid StageSplit of L layers into P stages.
// Errors: as ValidateLayerSplitProblem, or kInvalidArgument naming "splits[d]".
absl::StatusOr<LayerSplitPlan> PlanMicroBatchesForSplits(const LayerSplitProblem& problem,
                                                         const std::vector<StageSplit>& splits);

// The predicted iteration of a given plan (splits and counts), as PlanLayerSplit reports it.
// Errors: as above, or kInvalidArgument naming "micro_batches[d]" (size D, positive multiples of
// q summing to M).
absl::StatusOr<LayerSplitPlan> EvaluateLayerSplit(const LayerSplitProblem& problem,
                                                  const std::vector<StageSplit>& splits,
                                                  const std::vector<int64_t>& micro_batches);

// The split a uniform partition gives: L layers, P stages, stage s starting at layer
// ⌊s·L/P⌋. kInvalidArgument unless 1 <= P <= L.
absl::StatusOr<StageSplit> EvenStageSplit(int layers, int stages);

// How much of a slowdown a plan can recover, all predicted by the same model: `healthy` is the
// baseline plan with every slowdown 1, `slowed` the baseline under the slowdowns, `planned` the
// plan's. recoverable = (slowed − planned) / (slowed − healthy); 0 when the slowdowns cost nothing
// (slowed <= healthy). Above 1 when the plan beats the baseline even for the healthy job (the
// baseline split was not the best one, e.g. a heavy embedding or head on an even split).
struct RecoverableCeiling {
  absl::Duration healthy;
  absl::Duration slowed;
  absl::Duration planned;
  double recoverable = 0;
};
// baseline_splits / baseline_micro_batches: the plan before the fault (as EvaluateLayerSplit).
absl::StatusOr<RecoverableCeiling> CeilingOf(const LayerSplitProblem& problem,
                                             const std::vector<StageSplit>& baseline_splits,
                                             const std::vector<int64_t>& baseline_micro_batches,
                                             const LayerSplitPlan& plan);

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_LAYER_SPLIT_PLANNER_H_
