// Moving model state between ranks without disk, for S3 (docs/algorithms.md#s3-topology-planner:
// ranks change (dp, pp) positions) and S2L (a layer split: a DP group's pipeline moves blocks
// between its stages). Where each layer lives is a Placement: the layout and the split in force
// per DP group. Every DP replica holds every layer once, with the same parameters and Adam
// moments, so a rank that holds a layer after the change and not before copies it from a rank
// that held it before: PlanRemap lists those copies, ExecuteRemap carries them out through host
// staging buffers with point-to-point ops on the world communicator.
//
// The transfers are executed in the plan's global order on every rank (each rank skipping the
// ones it is not part of), so the per-pair order matches and blocking send/recv cannot deadlock.
#ifndef FALCON_TRAINER_DIRECTIVES_REMAP_H_
#define FALCON_TRAINER_DIRECTIVES_REMAP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "analysis/plan/layout.h"
#include "collective/communicator.h"
#include "common/layer_split.h"
#include "trainer/model/model_config.h"
#include "trainer/model/stage_model.h"

namespace falcon::trainer::directives {

// Where the model's layers live: rank r holds the layers of stage layout.at(r).pp of the split
// of its DP group, splits[layout.at(r).dp] (blocks per stage, common/layer_split.h).
struct Placement {
  analysis::plan::Layout layout;
  // One entry per DP index, each with layout.pp_size() counts summing to the model's blocks.
  // Empty: every pipeline split evenly.
  std::vector<common::StageBlocks> splits;
};

// The layers rank `rank` holds under `placement`.
model::StageLayers LayersOfRank(const model::ModelConfig& config, const Placement& placement,
                                int rank);

struct LayerTransfer {
  int layer = 0;
  int src_rank = 0;  // Held the layer before.
  int dst_rank = 0;  // Holds it after, and did not before.
  bool operator==(const LayerTransfer& o) const {
    return layer == o.layer && src_rank == o.src_rank && dst_rank == o.dst_rank;
  }
};

// The copies that take every rank from its layers under `from` to its layers under `to` (same
// world). Ordered by layer, then destination rank. A receiver that keeps its DP index copies from
// that DP group's previous holder (for a layer split: the stage of its own pipeline that held the
// block, its neighbour unless the split moves a block past a whole stage); a receiver that changes
// DP group takes turns with the others over the layer's previous holders (round robin by rank),
// spreading the load.
std::vector<LayerTransfer> PlanRemap(const model::ModelConfig& config, const Placement& from,
                                     const Placement& to);
// The same with every pipeline split evenly on both sides (an S3 change of an even job).
std::vector<LayerTransfer> PlanRemap(const model::ModelConfig& config,
                                     const analysis::plan::Layout& from,
                                     const analysis::plan::Layout& to);

// Bytes moved by `plan` (parameters plus both Adam moments, float32).
int64_t RemapBytes(const model::ModelConfig& config, const std::vector<LayerTransfer>& plan);

// Builds this rank's stage under `to` from `old_stage` (its stage before) and the transfers of
// `plan` it takes part in; kept and received layers are bitwise copies. `world` ranks are global
// ranks. Communicator errors pass through.
absl::StatusOr<std::unique_ptr<model::StageModel>> ExecuteRemap(
    const model::ModelConfig& config, const Placement& to, const std::vector<LayerTransfer>& plan,
    const model::StageModel& old_stage, collective::Communicator& world);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_REMAP_H_
