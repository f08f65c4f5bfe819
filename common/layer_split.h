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
#include "absl/strings/string_view.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::common {

// Most blocks a pipeline may have (matches analysis::plan::kMaxSplitLayers).
inline constexpr int kMaxPipelineBlocks = 4096;

// Most bytes of state one block may move between stages (ShimHello.block_state_bytes,
// JobRegistration.block_state_bytes, the shim's options): 1 PiB.
inline constexpr uint64_t kMaxBlockStateBytes = uint64_t{1} << 50;

// Blocks per stage of one pipeline, indexed by pp index.
using StageBlocks = std::vector<int>;

// The even split of `blocks` blocks into `stages` stages: stage s holds blocks
// [⌊s·blocks/stages⌋, ⌊(s+1)·blocks/stages⌋). Requires 1 <= stages <= blocks.
StageBlocks EvenStageBlocks(int blocks, int stages);

// Checks a model's pipeline shape as the shim's options, a ShimHello and a JobRegistration carry
// it: `pipeline_blocks` 0 (unknown) or in [max(pp_size, 1), kMaxPipelineBlocks] (`pp_size` 0:
// unknown), `block_state_bytes` at most kMaxBlockStateBytes (0: unknown). kInvalidArgument
// "<field_prefix>pipeline_blocks: ..." or "<field_prefix>block_state_bytes: ...", e.g. with
// field_prefix "hello.": "hello.pipeline_blocks: 3 is not 0 (unknown) or in [4 (pp_size), 4096]".
absl::Status ValidatePipelineShape(int64_t pipeline_blocks, uint64_t block_state_bytes,
                                   int64_t pp_size, absl::string_view field_prefix);

// Checks a LayerSplit against the job: `dp` >= 1 and `pp` >= 1; `replicas` has `dp` entries of
// `pp` stage counts, each >= 1, every replica's summing to the same count, at most
// kMaxPipelineBlocks, which is `blocks` when known; `micro_batches` has `dp` entries, each >= 1,
// summing to `global_micro_batches`. A zero `blocks` or `global_micro_batches` means unknown (the
// replicas then only agree with replicas[0]; the plan's sum is not checked). kInvalidArgument
// naming the field, e.g. "layer_split.replicas[2].stage_blocks[0]"; a `dp` < 1 is
// "layer_split.replicas: empty", a `pp` < 1 "layer_split.replicas[0].stage_blocks: empty".
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
