#include "trainer/directives/remap.h"

#include <algorithm>

namespace falcon::trainer::directives {

model::StageLayers LayersOfRank(const model::ModelConfig& config, const Placement& placement,
                                int rank) {
  const analysis::plan::RankPlacement& p = placement.layout.at(rank);
  if (placement.splits.empty()) return LayersOfStage(config, placement.layout.pp_size(), p.pp);
  return LayersOfStage(config, placement.splits[p.dp], p.pp);
}

std::vector<LayerTransfer> PlanRemap(const model::ModelConfig& config, const Placement& from,
                                     const Placement& to) {
  const int world = from.layout.world_size();
  std::vector<model::StageLayers> before(world), after(world);
  for (int r = 0; r < world; ++r) {
    before[r] = LayersOfRank(config, from, r);
    after[r] = LayersOfRank(config, to, r);
  }
  std::vector<LayerTransfer> plan;
  for (int layer = 0; layer < config.num_layers(); ++layer) {
    std::vector<int> holders;
    std::vector<int> receivers;
    for (int r = 0; r < world; ++r) {
      const bool had = before[r].Contains(layer);
      if (had) holders.push_back(r);
      if (after[r].Contains(layer) && !had) receivers.push_back(r);
    }
    for (size_t i = 0; i < receivers.size(); ++i) {
      const int r = receivers[i];
      int src = holders[i % holders.size()];
      const int dp = to.layout.at(r).dp;
      if (dp == from.layout.at(r).dp) {
        for (int h : holders) {
          if (from.layout.at(h).dp == dp) src = h;
        }
      }
      plan.push_back(LayerTransfer{layer, src, r});
    }
  }
  return plan;
}

std::vector<LayerTransfer> PlanRemap(const model::ModelConfig& config,
                                     const analysis::plan::Layout& from,
                                     const analysis::plan::Layout& to) {
  return PlanRemap(config, Placement{from, {}}, Placement{to, {}});
}

int64_t RemapBytes(const model::ModelConfig& config, const std::vector<LayerTransfer>& plan) {
  int64_t bytes = 0;
  for (const LayerTransfer& t : plan) bytes += 3 * LayerParamCount(config, t.layer) * 4;
  return bytes;
}

absl::StatusOr<std::unique_ptr<model::StageModel>> ExecuteRemap(
    const model::ModelConfig& config, const Placement& to, const std::vector<LayerTransfer>& plan,
    const model::StageModel& old_stage, collective::Communicator& world) {
  const int me = world.global_rank();
  auto stage = std::make_unique<model::StageModel>(config, LayersOfRank(config, to, me));
  const model::StageLayers mine = stage->layers();
  // Layers this rank keeps are copied locally.
  for (int l = mine.first; l < mine.end; ++l) {
    if (!old_stage.layers().Contains(l)) continue;
    const int64_t n = stage->LayerSize(l);
    const int64_t src = old_stage.LayerOffset(l), dst = stage->LayerOffset(l);
    std::copy_n(old_stage.params() + src, n, stage->params() + dst);
    std::copy_n(old_stage.adam_m() + src, n, stage->adam_m() + dst);
    std::copy_n(old_stage.adam_v() + src, n, stage->adam_v() + dst);
  }
  std::vector<float> staging;
  for (const LayerTransfer& t : plan) {
    if (t.src_rank != me && t.dst_rank != me) continue;
    const int64_t n = LayerParamCount(config, t.layer);
    staging.resize(3 * n);
    // Ranks of the world communicator are global ranks (it spans the world in rank order).
    if (t.src_rank == me) {
      const int64_t off = old_stage.LayerOffset(t.layer);
      std::copy_n(old_stage.params() + off, n, staging.data());
      std::copy_n(old_stage.adam_m() + off, n, staging.data() + n);
      std::copy_n(old_stage.adam_v() + off, n, staging.data() + 2 * n);
      if (absl::Status s =
              world.Send(collective::HostBuffer(staging.data(), staging.size()), t.dst_rank);
          !s.ok()) {
        return s;
      }
    } else {
      if (absl::Status s =
              world.Recv(collective::HostBuffer(staging.data(), staging.size()), t.src_rank);
          !s.ok()) {
        return s;
      }
      const int64_t off = stage->LayerOffset(t.layer);
      std::copy_n(staging.data(), n, stage->params() + off);
      std::copy_n(staging.data() + n, n, stage->adam_m() + off);
      std::copy_n(staging.data() + 2 * n, n, stage->adam_v() + off);
    }
  }
  return stage;
}

}  // namespace falcon::trainer::directives
