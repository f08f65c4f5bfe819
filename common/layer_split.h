// The S2L layer split body (falcon.v1.LayerSplit, docs/algorithms.md#layer-split-planner) in one
// place for every component that reads or writes it: the controller that plans it, the shim that
// screens it, the trainer that applies it.
//
// A split gives each DP group's pipeline its own contiguous partition of the model's blocks (the
// layers between the embedding, always on stage 0, and the head, always on the last stage):
// StageBlocks[s] blocks on stage s, so stage s holds blocks [Σ_{t<s} StageBlocks[t], that + its
// own count). An empty split list means every pipeline is split evenly (EvenStageBlocks).
//
// Thread-compatible pure functions.
#ifndef FALCON_COMMON_LAYER_SPLIT_H_
#define FALCON_COMMON_LAYER_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::common {

// Most blocks a pipeline may have (matches analysis::plan::kMaxSplitLayers).
inline constexpr int kMaxPipelineBlocks = 4096;

// Blocks per stage of one pipeline, indexed by pp index.
using StageBlocks = std::vector<int>;

// The even split of `blocks` blocks into `stages` stages: stage s holds blocks
// [⌊s·blocks/stages⌋, ⌊(s+1)·blocks/stages⌋). Requires 1 <= stages <= blocks.
StageBlocks EvenStageBlocks(int blocks, int stages);

// Checks a LayerSplit against the job: `replicas` has `dp` entries of `pp` stage counts, each
// >= 1, summing to `blocks`; `micro_batches` has `dp` entries, each >= 1, summing to
// `global_micro_batches`. A zero `blocks` or `global_micro_batches` means unknown (that sum is not
// checked). kInvalidArgument naming the field, e.g. "layer_split.replicas[2].stage_blocks[0]".
absl::Status ValidateLayerSplit(const ::falcon::v1::LayerSplit& split, int dp, int pp, int blocks,
                                int64_t global_micro_batches);

// The per-DP-group stage counts of a (valid) LayerSplit.
std::vector<StageBlocks> StageBlocksOf(const ::falcon::v1::LayerSplit& split);

// Fills `split`'s replicas from per-DP-group stage counts (micro_batches untouched).
void SetStageBlocks(const std::vector<StageBlocks>& replicas, ::falcon::v1::LayerSplit* split);

// Whether every pipeline in `replicas` holds the even split of `blocks` (true for an empty list).
bool IsEvenSplit(const std::vector<StageBlocks>& replicas, int blocks);

// "6+10" for one pipeline; "dp2 6+10" per uneven replica joined by ", " for a job ("even" when
// every pipeline is even), for logs, ack reasons and falconctl.
std::string StageBlocksText(const StageBlocks& stages);
std::string SplitText(const std::vector<StageBlocks>& replicas, int blocks);

}  // namespace falcon::common

#endif  // FALCON_COMMON_LAYER_SPLIT_H_
