#include "trainer/directives/layer_split.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

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

std::vector<GradientGroup> GradientGroups(const model::ModelConfig& config,
                                          const std::vector<common::StageBlocks>& splits) {
  const int dp = static_cast<int>(splits.size());
  // ends[d][s]: the layer after DP group d's stage s.
  std::vector<std::vector<int>> ends(dp);
  for (int d = 0; d < dp; ++d) {
    for (int s = 0; s < static_cast<int>(splits[d].size()); ++s) {
      ends[d].push_back(model::LayersOfStage(config, splits[d], s).end);
    }
  }
  std::vector<GradientGroup> groups;
  std::vector<int> stages(dp, 0);
  for (int l = 0; l < config.num_layers(); ++l) {
    for (int d = 0; d < dp; ++d) {
      while (l >= ends[d][stages[d]]) ++stages[d];
    }
    if (groups.empty() || groups.back().stages != stages) {
      groups.push_back(GradientGroup{l, l + 1, stages});
    } else {
      groups.back().end = l + 1;
    }
  }
  return groups;
}

absl::StatusOr<std::unique_ptr<SplitGradientReducer>> SplitGradientReducer::Create(
    const model::ModelConfig& config, const std::vector<common::StageBlocks>& splits, int dp,
    int pp, collective::Communicator& world) {
  if (splits.empty() || splits.front().empty()) {
    return absl::InvalidArgumentError("gradient reducer: empty split");
  }
  const int num_dp = static_cast<int>(splits.size());
  const int num_pp = static_cast<int>(splits.front().size());
  for (int d = 0; d < num_dp; ++d) {
    const common::StageBlocks& s = splits[d];
    bool ok = static_cast<int>(s.size()) == num_pp;
    int sum = 0;
    for (int blocks : s) {
      ok = ok && blocks >= 1;
      sum += blocks;
    }
    if (!ok || sum != config.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient reducer: split ", common::StageBlocksText(s), " of DP group ", d, " is not ",
          num_pp, " stages of >= 1 blocks summing to ", config.num_blocks));
    }
  }
  if (dp < 0 || dp >= num_dp || pp < 0 || pp >= num_pp) {
    return absl::InvalidArgumentError(absl::StrCat("gradient reducer: position (", dp, ", ", pp,
                                                   ") outside ", num_dp, " x ", num_pp));
  }
  std::unique_ptr<SplitGradientReducer> r(new SplitGradientReducer());
  r->layers_ = model::LayersOfStage(config, splits[dp], pp);
  if (SameSplitEverywhere(splits)) return r;
  r->groups_ = GradientGroups(config, splits);
  // The global order: the groups every pipeline holds on one stage first, then the groups that
  // cross stages (AllReduce in the header).
  const auto on_one_stage = [](const GradientGroup& g) {
    return std::all_of(g.stages.begin(), g.stages.end(),
                       [&g](int stage) { return stage == g.stages.front(); });
  };
  std::vector<int> order(r->groups_.size());
  for (int k = 0; k < static_cast<int>(order.size()); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return on_one_stage(r->groups_[a]) && !on_one_stage(r->groups_[b]);
  });
  for (const int k : order) {
    const bool holds = r->groups_[k].stages[dp] == pp;
    absl::StatusOr<std::unique_ptr<collective::Communicator>> comm = world.Split(
        holds ? 0 : collective::Communicator::kNoColor, dp,
        collective::CommLabel{collective::CommKind::COMM_KIND_DP, absl::StrCat("dp.split", k)});
    if (!comm.ok()) return comm.status();
    if (!holds) continue;
    r->held_.push_back(k);
    r->comms_.push_back(*std::move(comm));
  }
  return r;
}

absl::Status SplitGradientReducer::AllReduce(model::StageModel& stage,
                                             collective::Communicator& dp_comm) {
  if (stage.layers().first != layers_.first || stage.layers().end != layers_.end) {
    return absl::InvalidArgumentError(absl::StrCat("gradient reducer: the stage holds layers [",
                                                   stage.layers().first, ", ", stage.layers().end,
                                                   "), the split gives this rank [", layers_.first,
                                                   ", ", layers_.end, ")"));
  }
  if (groups_.empty()) {
    if (dp_comm.size() <= 1) return absl::OkStatus();
    const collective::Buffer grads = collective::HostBuffer(stage.grads(), stage.num_params());
    return dp_comm.AllReduce(grads, grads, collective::ReduceOp::kSum);
  }
  // Group i's slice over its communicator.
  const auto reduce = [this, &stage](size_t i) {
    const GradientGroup& g = groups_[held_[i]];
    const int64_t begin = stage.LayerOffset(g.first);
    const int64_t end = stage.LayerOffset(g.end - 1) + stage.LayerSize(g.end - 1);
    const collective::Buffer slice = collective::HostBuffer(stage.grads() + begin, end - begin);
    return comms_[i]->AllReduce(slice, slice, collective::ReduceOp::kSum);
  };
  // Side by side, one thread per group beyond the first: the slices are disjoint and each
  // communicator is used by one thread (collective/communicator.h allows that).
  std::vector<absl::Status> status(held_.size());
  std::vector<std::thread> others;
  others.reserve(held_.size());
  for (size_t i = 1; i < held_.size(); ++i) {
    others.emplace_back([&status, &reduce, i] { status[i] = reduce(i); });
  }
  if (!held_.empty()) status[0] = reduce(0);
  for (std::thread& t : others) t.join();
  // The cause first: a group whose peer died fails at once, the others then time out waiting.
  absl::Status first;
  for (const absl::Status& st : status) {
    if (st.ok()) continue;
    if (st.code() != absl::StatusCode::kDeadlineExceeded) return st;
    if (first.ok()) first = st;
  }
  return first;
}

}  // namespace falcon::trainer::directives
