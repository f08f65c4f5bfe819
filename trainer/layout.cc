#include "trainer/layout.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace falcon::trainer {

Layout::Layout(int dp, int pp, std::vector<RankPosition> positions)
    : dp_(dp), pp_(pp), positions_(std::move(positions)), ranks_(dp * pp, -1) {
  for (int r = 0; r < world(); ++r) ranks_[positions_[r].dp * pp_ + positions_[r].pp] = r;
}

absl::StatusOr<Layout> Layout::Default(int world, int dp, int pp) {
  if (dp < 1 || pp < 1 || dp * pp != world) {
    return absl::InvalidArgumentError(absl::StrCat("layout DP=", dp, " x PP=", pp, " needs ",
                                                   dp * pp, " ranks but the world has ", world));
  }
  std::vector<RankPosition> positions(world);
  for (int r = 0; r < world; ++r) positions[r] = RankPosition{r % dp, r / dp};
  return Layout(dp, pp, std::move(positions));
}

absl::StatusOr<Layout> Layout::FromPositions(int dp, int pp, std::vector<RankPosition> positions) {
  const int world = static_cast<int>(positions.size());
  if (dp < 1 || pp < 1 || dp * pp != world) {
    return absl::InvalidArgumentError(absl::StrCat("layout DP=", dp, " x PP=", pp, " needs ",
                                                   dp * pp, " ranks but ", world, " are given"));
  }
  std::vector<int> owner(dp * pp, -1);
  for (int r = 0; r < world; ++r) {
    const RankPosition p = positions[r];
    if (p.dp < 0 || p.dp >= dp || p.pp < 0 || p.pp >= pp) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " position (dp=", p.dp, ", pp=", p.pp, ") is outside DP=", dp, " x PP=", pp));
    }
    int& o = owner[p.dp * pp + p.pp];
    if (o >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks ", o, " and ", r, " share position (dp=", p.dp, ", pp=", p.pp, ")"));
    }
    o = r;
  }
  return Layout(dp, pp, std::move(positions));
}

absl::StatusOr<Layout> Layout::FromTopologyChange(const falcon::v1::TopologyChange& change,
                                                  int world) {
  if (change.assignments_size() != world) {
    return absl::InvalidArgumentError(absl::StrCat("topology_change.assignments has ",
                                                   change.assignments_size(),
                                                   " entries; the world has ", world, " ranks"));
  }
  std::vector<RankPosition> positions(world, RankPosition{-1, -1});
  std::vector<bool> seen(world, false);
  int dp = 0, pp = 0;
  for (int i = 0; i < change.assignments_size(); ++i) {
    const falcon::v1::RankAssignment& a = change.assignments(i);
    const std::string field = absl::StrCat("topology_change.assignments[", i, "]");
    if (a.rank() >= static_cast<uint32_t>(world)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".rank = ", a.rank(), " is outside the world of ", world));
    }
    if (seen[a.rank()]) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".rank = ", a.rank(), " is assigned twice"));
    }
    if (a.tp_index() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".tp_index = ", a.tp_index(),
                       ": the reference trainer has no tensor parallelism"));
    }
    if (a.dp_index() >= static_cast<uint32_t>(world) ||
        a.pp_index() >= static_cast<uint32_t>(world)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (dp ", a.dp_index(), ", pp ", a.pp_index(), ") is out of range"));
    }
    for (int j = 0; j < i; ++j) {
      const falcon::v1::RankAssignment& b = change.assignments(j);
      if (b.dp_index() == a.dp_index() && b.pp_index() == a.pp_index()) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology_change: ranks ", b.rank(), " and ", a.rank(),
                         " share position (dp=", a.dp_index(), ", pp=", a.pp_index(), ")"));
      }
    }
    seen[a.rank()] = true;
    positions[a.rank()] =
        RankPosition{static_cast<int>(a.dp_index()), static_cast<int>(a.pp_index())};
    dp = std::max(dp, positions[a.rank()].dp + 1);
    pp = std::max(pp, positions[a.rank()].pp + 1);
  }
  absl::StatusOr<Layout> layout = FromPositions(dp, pp, std::move(positions));
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("topology_change: ", layout.status().message()));
  }
  return layout;
}

std::vector<int> Layout::PipelineRanks(int dp) const {
  std::vector<int> out;
  for (int s = 0; s < pp_; ++s) out.push_back(RankAt(dp, s));
  return out;
}

std::vector<int> Layout::StageRanks(int pp) const {
  std::vector<int> out;
  for (int d = 0; d < dp_; ++d) out.push_back(RankAt(d, pp));
  return out;
}

std::string Layout::ToString() const {
  std::string out = absl::StrCat("DP=", dp_, " x PP=", pp_, " [");
  for (int r = 0; r < world(); ++r) {
    absl::StrAppend(&out, r ? " " : "", "r", r, ":(", positions_[r].dp, ",", positions_[r].pp, ")");
  }
  return out + "]";
}

absl::Status ValidateParallelConfig(int world, int dp, int pp, int microbatches, int num_blocks) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("--dp ", dp, " must be >= 1"));
  if (pp < 1) return absl::InvalidArgumentError(absl::StrCat("--pp ", pp, " must be >= 1"));
  if (world != dp * pp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout --dp ", dp, " x --pp ", pp, " = ", dp * pp, " ranks ",
        world % (dp * pp) != 0 ? "does not divide" : "does not match", " the world size ", world));
  }
  if (microbatches < pp || microbatches % pp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--microbatches ", microbatches, " is not a positive multiple of --pp ", pp,
                     " (under 1F1B every DP group runs a multiple of PP micro-batches)"));
  }
  if (pp > num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("--pp ", pp, " exceeds --layers ", num_blocks,
                                                   ": every pipeline stage needs a block"));
  }
  return absl::OkStatus();
}

std::vector<int> EvenMicroBatchPlan(int dp, int pp, int microbatches) {
  const int chunks = microbatches / pp;
  std::vector<int> plan(dp);
  for (int d = 0; d < dp; ++d) plan[d] = (chunks / dp + (d < chunks % dp ? 1 : 0)) * pp;
  return plan;
}

absl::Status ValidateMicroBatchPlan(const std::vector<int>& plan, int dp, int pp,
                                    int microbatches) {
  if (static_cast<int>(plan.size()) != dp) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan has ", plan.size(),
                                                   " entries; the layout has ", dp, " DP groups"));
  }
  int64_t sum = 0;
  for (int d = 0; d < dp; ++d) {
    if (plan[d] < 0 || plan[d] % pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan.micro_batches[", d, "] = ",
                                                     plan[d], " is not a multiple of PP = ", pp));
    }
    sum += plan[d];
  }
  if (sum != microbatches) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan sums to ", sum,
                                                   "; the global batch has ", microbatches,
                                                   " micro-batches"));
  }
  return absl::OkStatus();
}

int MicroBatchOffset(const std::vector<int>& plan, int dp) {
  int offset = 0;
  for (int d = 0; d < dp; ++d) offset += plan[d];
  return offset;
}

}  // namespace falcon::trainer
