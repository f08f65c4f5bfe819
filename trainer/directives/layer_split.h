// S2L on the reference trainer (docs/algorithms.md#layer-split-planner): each DP group's pipeline
// may split the model's blocks differently (common/layer_split.h), so a slow stage holds fewer
// blocks. What the rank trainer needs beyond moving the layers (directives/remap.h): the emulated
// device time of a stage by the blocks it holds, and the gradient all-reduce when the replicas of
// a stage no longer hold the same layers.
//
// Thread-compatible.
#ifndef FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_
#define FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_

#include <vector>

#include "absl/status/status.h"
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

// Sums the gradients of `stage` (this rank's layers) over the DP replicas, in place. When every
// pipeline is split alike (SameSplitEverywhere): one all-reduce of the stage's buffer over
// `dp_comm` (its stage's DP group). Otherwise a layer's DP replicas sit at different stages: one
// all-reduce (sum) over `world` of a model-sized buffer (every layer at its offset in layer order)
// where each rank writes its own layers' gradients and zeros elsewhere, each layer then holding
// the sum over its DP holders (one per replica; adding zeros is exact), read back into the stage.
// `scratch` is the reused model-sized buffer. Communicator errors pass through.
absl::Status AllReduceGradients(const model::ModelConfig& config,
                                const std::vector<common::StageBlocks>& splits,
                                model::StageModel& stage, collective::Communicator& dp_comm,
                                collective::Communicator& world, std::vector<float>* scratch);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_LAYER_SPLIT_H_
