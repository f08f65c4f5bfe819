// S2L on the reference trainer (docs/algorithms.md#layer-split-planner): each DP group's pipeline
// may split the model's blocks differently (common/layer_split.h), so a slow stage holds fewer
// blocks. What the rank trainer needs beyond moving the layers (directives/remap.h): the emulated
// device time of a stage by the blocks it holds, and the gradient all-reduce when the replicas of
// a stage no longer hold the same layers (over one sub-communicator per set of layers whose DP
// replicas sit at the same stages, so each rank all-reduces only its own stage's gradients, as
// with the per-stage DP all-reduce).
//
// Thread-compatible.
#ifndef FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_
#define FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/communicator.h"
#include "common/layer_split.h"
#include "trainer/model/model_config.h"
#include "trainer/model/stage_model.h"

namespace falcon::trainer::directives {

// The even split for every one of `dp` DP groups: dp copies of common::EvenStageBlocks(blocks,
// pp). Requires 1 <= pp <= blocks.
std::vector<common::StageBlocks> EvenSplits(int dp, int pp, int blocks);

// Whether every DP group's pipeline is split alike (so the DP replicas of each stage hold the
// same layers). True for an empty list.
bool SameSplitEverywhere(const std::vector<common::StageBlocks>& splits);

// Emulated device time of a compute phase worth `units` forward micro-batches (backward: 2, times
// a compute fault's factor) on a stage holding `blocks_held` of the model's `num_blocks` blocks in
// a pipeline of `pp` stages: per_forward * units * blocks_held / (num_blocks / pp). `per_forward`
// is the time of one forward micro-batch on a stage of the average size, so an even split of
// blocks divisible by pp is exactly per_forward * units on every stage, and a stage with half
// the blocks takes half the time. The embedding and the head count for nothing.
absl::Duration EmulatedStageTime(absl::Duration per_forward, double units, int blocks_held,
                                 int num_blocks, int pp);

// The layers whose gradients are summed together while the pipelines' splits differ: the layers
// [first, end), which DP group d's pipeline holds on its stage stages[d], for every d. Their
// holders are the D ranks at (d, stages[d]), one per DP group.
struct GradientGroup {
  int first = 0;
  int end = 0;
  std::vector<int> stages;  // By DP index.
  bool operator==(const GradientGroup& o) const {
    return first == o.first && end == o.end && stages == o.stages;
  }
};

// The gradient groups of `splits` (one entry per DP group, each of P >= 1 counts >= 1 summing to
// config.num_blocks; not checked here): the layers (embedding, blocks, head) grouped by their
// tuple of stages (stage_0(l), ..., stage_{D-1}(l)). A layer's stage never falls as the layer
// rises in any pipeline, so the layers of one tuple are contiguous and the groups, in layer order,
// are also in tuple order; there are at most 1 + D (P - 1). Every pipeline split alike: P groups,
// group s the layers of stage s with every stage s. E.g. D 4, P 2, 16 blocks, DP group 2 split
// 6+10, the others 8+8: layers [0, 7) at (0,0,0,0), [7, 9) at (0,0,1,0), [9, 18) at (1,1,1,1).
std::vector<GradientGroup> GradientGroups(const model::ModelConfig& config,
                                          const std::vector<common::StageBlocks>& splits);

// The DP gradient all-reduce of a step under the split in force: sums each layer's gradients over
// its D holders (one per DP group), in place in the holders' stage buffers.
//   Every pipeline split alike (SameSplitEverywhere): one all-reduce of the whole stage buffer
//   over the rank's stage DP communicator, as without S2L; nothing is built.
//   Otherwise: one sub-communicator of the world per gradient group (GradientGroups), its D
//   holders in DP order (comm rank = DP index), labelled role DP, name "dp.split<k>" (k the
//   group's index), so telemetry sees DP all-reduces. A rank sums the slice of its stage buffer
//   that holds each group's layers (contiguous: a rank holds all of a group's layers or none) over
//   that group's communicator, its groups side by side (a thread per group beyond the first; the
//   slices are disjoint), so a step's reduce takes about one all-reduce, as under an even split.
//   In series, even in an order every rank shares (the one-stage groups first, then the crossing
//   ones), a crossing group waited for a one-stage one: measured on 8 local ranks, DP group 2 split
//   6+10, the iteration's time outside the pipeline grew 7-15 ms in layer order, and on the netns
//   demo 10-12 ms in 6 of 10 runs in the shared order. A rank all-reduces its own stage's floats,
//   as under an even split, in one call per group it holds. The groups keep the shared order
//   (held_groups) for telemetry and tests.
// Built when a split is applied or the layout changes, not per step. Thread-compatible.
class SplitGradientReducer {
 public:
  // `splits`: the split in force, one StageBlocks per DP group (D >= 1 entries of the same P >= 1
  // counts, each >= 1, summing to config.num_blocks); `dp`, `pp`: this rank's position.
  // Collective over `world` when the splits differ (every rank calls it with the same `splits`):
  // one Split round per group in order, the group's holders passing color 0 and key = their DP
  // index, the others Communicator::kNoColor. kInvalidArgument for malformed `splits` or a
  // position outside D x P; communicator errors pass through.
  static absl::StatusOr<std::unique_ptr<SplitGradientReducer>> Create(
      const model::ModelConfig& config, const std::vector<common::StageBlocks>& splits, int dp,
      int pp, collective::Communicator& world);

  // Sums `stage`'s gradients over their DP replicas, in place. `stage` must hold this rank's
  // layers under the split (kInvalidArgument naming both ranges otherwise); `dp_comm` (its stage's
  // DP communicator) is used only when every pipeline is split alike. Communicator errors pass
  // through.
  absl::Status AllReduce(model::StageModel& stage, collective::Communicator& dp_comm);

  // The gradient groups (GradientGroups) when the splits differ; empty when they are alike.
  const std::vector<GradientGroup>& groups() const { return groups_; }
  // Indices into groups() of the groups this rank holds, in the shared order above (the
  // one-stage groups first, then the crossing ones; each in layer order).
  const std::vector<int>& held_groups() const { return held_; }

 private:
  SplitGradientReducer() = default;

  model::StageLayers layers_;  // This rank's layers under the split.
  std::vector<GradientGroup> groups_;
  std::vector<int> held_;
  // held_[i]'s communicator.
  std::vector<std::unique_ptr<collective::Communicator>> comms_;
};

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_
