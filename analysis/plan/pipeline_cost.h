// 1F1B cost model: predicted iteration time of a DP × PP job from per-stage compute per
// micro-batch, PP point-to-point time, DP all-reduce time and the pipeline bubble. S2 and S3 use
// it to predict the benefit of a plan (docs/algorithms.md#1f1b-cost-model).
//
// Model (an approximation, stated so callers know what it assumes):
//   - Stage s of a replica spends, per micro-batch, cycle_s = c_s + h_{s−1} + h_s: its forward +
//     backward compute c_s plus the blocking sends it makes, activations forward over boundary
//     s → s+1 (h_s) and gradients backward over boundary s−1 → s (h_{s−1}); h_{−1} = h_{P−1} = 0.
//   - A replica with m micro-batches under 1F1B takes Σ_s cycle_s + (m − 1)·max_s cycle_s: one
//     micro-batch's trip through every stage (fill and drain) plus m − 1 more at the pace of the
//     slowest stage. For uniform stages this is (m + P − 1)·c, bubble fraction (P − 1)/m.
//   - After the last backward every stage all-reduces its gradients across DP replicas; these run
//     concurrently on disjoint groups and are not overlapped with compute, so the iteration takes
//     max over replicas of the pipeline time + max over stages of the all-reduce time.
// Checked against the paper's S2 figures in paper_figures_test.cc.
//
// Pure functions; thread-compatible.
#ifndef FALCON_ANALYSIS_PLAN_PIPELINE_COST_H_
#define FALCON_ANALYSIS_PLAN_PIPELINE_COST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::analysis::plan {

// One DP replica (pipeline).
struct PipelineTiming {
  // Forward + backward time of one micro-batch on each stage; size P >= 1, each >= 0.
  std::vector<absl::Duration> stage_compute;
  // One-way transfer time of one micro-batch's activations (and, backward, its gradients) across
  // boundary s → s+1; size P − 1, each >= 0.
  std::vector<absl::Duration> boundary_p2p;
  // Micro-batches this replica runs per iteration, >= 0 (0: the replica is idle).
  int64_t micro_batches = 0;
};

struct JobTiming {
  std::vector<PipelineTiming> replicas;  // One per DP index; D >= 1; all with the same P.
  // DP all-reduce time of each stage's gradients (the slowest TP group of the stage); size P.
  std::vector<absl::Duration> stage_allreduce;
};

struct IterationEstimate {
  absl::Duration iteration;  // pipeline + allreduce.
  absl::Duration pipeline;   // max over replicas of the 1F1B pipeline time.
  absl::Duration allreduce;  // max over stages of the DP all-reduce time.
  int slowest_replica = 0;   // DP index with the longest pipeline (lowest on ties).
  std::vector<absl::Duration> replica_pipeline;  // per DP index.
  std::vector<absl::Duration> replica_bubble;  // per DP index: fill/drain, Σ cycle − max cycle.
};

// cycle_s of `replica` (see the model above). REQUIRES: 0 <= stage < P.
absl::Duration StageCycle(const PipelineTiming& replica, int stage);

// max_s cycle_s: the replica's steady-state time per micro-batch, i.e. the t_i that S2 takes.
absl::Duration MicroBatchTime(const PipelineTiming& replica);

// Σ_s cycle_s + (m − 1)·max_s cycle_s; zero when m = 0.
absl::Duration PipelineTime(const PipelineTiming& replica);

// Per-replica MicroBatchTime, indexed by DP index: the input of SolveMicroBatches.
std::vector<absl::Duration> MicroBatchTimes(const JobTiming& job);

// kInvalidArgument (naming the field) when there are no replicas, stage counts differ, a
// boundary or all-reduce list has the wrong size, or a time or count is negative.
absl::Status ValidateJobTiming(const JobTiming& job);

// Predicted iteration time. Errors as ValidateJobTiming.
absl::StatusOr<IterationEstimate> EstimateIteration(const JobTiming& job);

// A job whose replicas are all alike: dp × pp, `micro_batches` per replica, `compute` per
// micro-batch on every stage, `p2p` on every boundary and `allreduce` on every stage.
// kInvalidArgument for dp < 1, pp < 1, micro_batches < 0 or a negative time.
absl::StatusOr<JobTiming> UniformJob(int dp, int pp, int64_t micro_batches, absl::Duration compute,
                                     absl::Duration p2p, absl::Duration allreduce);

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_PIPELINE_COST_H_
