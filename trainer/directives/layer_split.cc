#include "trainer/directives/layer_split.h"

#include <algorithm>
#include <cstdint>

namespace falcon::trainer::directives {

std::vector<common::StageBlocks> EvenSplits(int dp, int pp, int blocks) {
  return std::vector<common::StageBlocks>(dp, common::EvenStageBlocks(blocks, pp));
}

bool SameSplitEverywhere(const std::vector<common::StageBlocks>& splits) {
  for (const common::StageBlocks& s : splits) {
    if (s != splits.front()) return false;
  }
  return true;
}

absl::Duration EmulatedStageTime(absl::Duration per_forward, double units, int blocks_held,
                                 int num_blocks, int pp) {
  return per_forward * (units * (static_cast<double>(blocks_held) * pp / num_blocks));
}

absl::Status AllReduceGradients(const model::ModelConfig& config,
                                const std::vector<common::StageBlocks>& splits,
                                model::StageModel& stage, collective::Communicator& dp_comm,
                                collective::Communicator& world, std::vector<float>* scratch) {
  if (SameSplitEverywhere(splits)) {
    if (dp_comm.size() <= 1) return absl::OkStatus();
    const collective::Buffer grads = collective::HostBuffer(stage.grads(), stage.num_params());
    return dp_comm.AllReduce(grads, grads, collective::ReduceOp::kSum);
  }
  // Offset of each layer in the model-sized buffer.
  std::vector<int64_t> offset(config.num_layers() + 1, 0);
  for (int l = 0; l < config.num_layers(); ++l) {
    offset[l + 1] = offset[l] + LayerParamCount(config, l);
  }
  scratch->assign(offset.back(), 0.0f);
  const model::StageLayers mine = stage.layers();
  for (int l = mine.first; l < mine.end; ++l) {
    std::copy_n(stage.grads() + stage.LayerOffset(l), stage.LayerSize(l),
                scratch->data() + offset[l]);
  }
  const collective::Buffer all = collective::HostBuffer(scratch->data(), scratch->size());
  if (absl::Status s = world.AllReduce(all, all, collective::ReduceOp::kSum); !s.ok()) return s;
  for (int l = mine.first; l < mine.end; ++l) {
    std::copy_n(scratch->data() + offset[l], stage.LayerSize(l),
                stage.grads() + stage.LayerOffset(l));
  }
  return absl::OkStatus();
}

}  // namespace falcon::trainer::directives
