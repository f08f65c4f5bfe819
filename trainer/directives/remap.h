// S3 (docs/algorithms.md#s3-topology-planner): moving model state when ranks change (dp, pp)
// positions, without disk. Every DP replica of a stage holds the same parameters and Adam moments,
// so a rank that moves to stage s' copies each layer of s' it lacks from a rank that held that
// layer before: PlanRemap lists those copies, ExecuteRemap carries them out through host staging
// buffers with point-to-point ops on the world communicator.
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
#include "trainer/model/model_config.h"
#include "trainer/model/stage_model.h"

namespace falcon::trainer::directives {

struct LayerTransfer {
  int layer = 0;
  int src_rank = 0;  // Held the layer before.
  int dst_rank = 0;  // Holds it after, and did not before.
  bool operator==(const LayerTransfer& o) const {
    return layer == o.layer && src_rank == o.src_rank && dst_rank == o.dst_rank;
  }
};

// The copies that take every rank from its stage under `from` to its stage under `to` (same
// world). Ordered by layer, then destination rank. A layer's receivers take turns over its
// previous holders (round robin by rank), spreading the load.
std::vector<LayerTransfer> PlanRemap(const model::ModelConfig& config,
                                     const analysis::plan::Layout& from,
                                     const analysis::plan::Layout& to);

// Bytes moved by `plan` (parameters plus both Adam moments, float32).
int64_t RemapBytes(const model::ModelConfig& config, const std::vector<LayerTransfer>& plan);

// Builds this rank's stage under `to` from `old_stage` (its stage under `from`) and the transfers
// of `plan` it takes part in. `world` ranks are global ranks. Communicator errors pass through.
absl::StatusOr<std::unique_ptr<model::StageModel>> ExecuteRemap(
    const model::ModelConfig& config, const analysis::plan::Layout& to,
    const std::vector<LayerTransfer>& plan, const model::StageModel& old_stage,
    collective::Communicator& world);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_REMAP_H_
