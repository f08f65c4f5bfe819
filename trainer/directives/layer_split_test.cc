#include "trainer/directives/layer_split.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/comm_runtime.h"
#include "collective/gloo/gloo_communicator.h"
#include "common/clock.h"
#include "common/testing/multiprocess.h"
#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

TEST(LayerSplitTest, EvenSplitsAndSameness) {
  const std::vector<common::StageBlocks> even = EvenSplits(3, 2, 9);
  ASSERT_EQ(even.size(), 3u);
  for (const common::StageBlocks& s : even) EXPECT_EQ(s, (common::StageBlocks{4, 5}));
  EXPECT_TRUE(SameSplitEverywhere(even));
  EXPECT_TRUE(SameSplitEverywhere({}));
  EXPECT_FALSE(SameSplitEverywhere({{4, 5}, {3, 6}, {4, 5}}));
}

TEST(LayerSplitTest, EmulatedTimeScalesWithTheBlocksAStageHolds) {
  const absl::Duration d = absl::Milliseconds(5);
  // An even split of blocks divisible by PP: exactly the per-forward time times the units.
  EXPECT_EQ(EmulatedStageTime(d, 1, 8, 16, 2), d);
  EXPECT_EQ(EmulatedStageTime(d, 2, 4, 16, 4), 2 * d);
  EXPECT_EQ(EmulatedStageTime(d, 2 * 1.5, 8, 16, 2), d * 3.0);  // A fault's factor stretches it.
  // Half the blocks: half the time; the stage that took them: 1.5 times.
  EXPECT_EQ(EmulatedStageTime(d, 1, 4, 16, 2), d / 2);
  EXPECT_EQ(EmulatedStageTime(d, 2, 4, 16, 2), d);
  EXPECT_EQ(EmulatedStageTime(d, 1, 12, 16, 2), d * 1.5);
  // Blocks not divisible by PP: each stage by its share of the average (3 of 2.5 blocks).
  EXPECT_EQ(EmulatedStageTime(d, 1, 3, 5, 2), d * 1.2);
  EXPECT_EQ(EmulatedStageTime(absl::ZeroDuration(), 2, 3, 5, 2), absl::ZeroDuration());
}

model::ModelConfig TinyModel(int blocks) {
  model::ModelConfig c;
  c.vocab_size = 5;
  c.context = 2;
  c.embed_dim = 2;
  c.hidden = 4;
  c.ffn = 4;
  c.num_blocks = blocks;
  c.micro_batch_size = 2;
  return c;
}

TEST(GradientGroupsTest, LayersGroupByTheirStagesInEveryPipeline) {
  const model::ModelConfig c = TinyModel(16);  // Layers 0 (embedding), 1..16 (blocks), 17 (head).
  // DP group 2 moves blocks 6 and 7 (layers 7, 8) to its stage 1.
  EXPECT_EQ(GradientGroups(c, {{8, 8}, {8, 8}, {6, 10}, {8, 8}}),
            (std::vector<GradientGroup>{
                {0, 7, {0, 0, 0, 0}}, {7, 9, {0, 0, 1, 0}}, {9, 18, {1, 1, 1, 1}}}));
  // Every pipeline alike: one group per stage, that stage everywhere.
  EXPECT_EQ(GradientGroups(c, EvenSplits(4, 2, 16)),
            (std::vector<GradientGroup>{{0, 9, {0, 0, 0, 0}}, {9, 18, {1, 1, 1, 1}}}));
  EXPECT_EQ(GradientGroups(c, {{16}}), (std::vector<GradientGroup>{{0, 18, {0}}}));
  // Blocks moved both ways and past a whole stage (1+14+1: DP group 1's stage 1 takes all of
  // DP group 0's stage 1 and parts of its neighbours').
  EXPECT_EQ(
      GradientGroups(c, {{5, 6, 5}, {1, 14, 1}}),
      (std::vector<GradientGroup>{
          {0, 2, {0, 0}}, {2, 6, {0, 1}}, {6, 12, {1, 1}}, {12, 16, {2, 1}}, {16, 18, {2, 2}}}));
}

// An exact gradient value of DP group `dp`'s copy of layer `layer` at `i`: small integers, so
// sums in any order are exact and two all-reduces can be compared bit for bit.
float Grad(int dp, int layer, int64_t i) {
  return static_cast<float>((dp + 1) * 100 + (layer * 7 + i) % 50);
}

// Fills `stage`'s gradients as DP group `dp` computed them.
void FillGrads(int dp, model::StageModel& stage) {
  for (int l = stage.layers().first; l < stage.layers().end; ++l) {
    for (int64_t i = 0; i < stage.LayerSize(l); ++i)
      stage.grads()[stage.LayerOffset(l) + i] = Grad(dp, l, i);
  }
}

// "" when every gradient of `stage` is the sum over the `num_dp` DP groups, else what differs.
std::string SumMismatch(int num_dp, const model::StageModel& stage) {
  for (int l = stage.layers().first; l < stage.layers().end; ++l) {
    for (int64_t i = 0; i < stage.LayerSize(l); ++i) {
      float want = 0;
      for (int d = 0; d < num_dp; ++d) want += Grad(d, l, i);
      const float got = stage.grads()[stage.LayerOffset(l) + i];
      if (got != want) {
        return absl::StrCat("layer ", l, " index ", i, ": ", got, " instead of ", want);
      }
    }
  }
  return "";
}

TEST(SplitGradientReducerTest, SumsEveryLayerOverItsHoldersLikeTheEvenDpAllReduce) {
  constexpr int kDp = 3, kPp = 2;
  const model::ModelConfig c = TinyModel(6);  // Layers 0..7.
  // Groups: [0, 2) at (0,0,0), [2, 4) at (0,1,0), [4, 6) at (1,1,0), [6, 8) at (1,1,1). Rank
  // (1,1) holds three of them, rank (1,0) one.
  const std::vector<common::StageBlocks> split = {{3, 3}, {1, 5}, {5, 1}};
  const std::vector<common::StageBlocks> even = EvenSplits(kDp, kPp, 6);
  const std::string dir = common::testing::FreshDir("split-gradient-reducer");
  const std::vector<common::testing::RankExit> exits = common::testing::RunRanksStatus(
      kDp * kPp,
      [&](int rank) -> absl::Status {
        const int dp = rank % kDp, pp = rank / kDp;  // The default layout.
        common::RealClock clock;
        collective::CommRuntimeOptions o;
        o.rank = rank;
        o.clock = &clock;
        auto runtime = std::make_shared<collective::CommRuntime>(o);
        collective::gloo::GlooWorldOptions w;
        w.rank = rank;
        w.world_size = kDp * kPp;
        w.rendezvous_dir = dir;
        w.timeout = absl::Seconds(30);
        absl::StatusOr<std::unique_ptr<collective::Communicator>> world =
            collective::gloo::CreateGlooWorld(w, runtime);
        if (!world.ok()) return world.status();
        absl::StatusOr<std::unique_ptr<collective::Communicator>> dp_comm = (*world)->Split(
            pp, dp, collective::CommLabel{collective::CommKind::COMM_KIND_DP, "dp"});
        if (!dp_comm.ok()) return dp_comm.status();

        // Malformed splits and positions fail before any collective.
        for (const std::vector<common::StageBlocks>& bad :
             std::vector<std::vector<common::StageBlocks>>{
                 {}, {{3, 3}, {6}}, {{3, 3}, {0, 6}}, {{3, 3}, {3, 4}}}) {
          absl::StatusOr<std::unique_ptr<SplitGradientReducer>> r =
              SplitGradientReducer::Create(c, bad, dp, pp, **world);
          if (r.status().code() != absl::StatusCode::kInvalidArgument) {
            return absl::InternalError(absl::StrCat("malformed split: ", r.status().ToString()));
          }
        }
        if (SplitGradientReducer::Create(c, split, 0, kPp, **world).status().code() !=
            absl::StatusCode::kInvalidArgument) {
          return absl::InternalError("a position outside D x P was accepted");
        }

        absl::StatusOr<std::unique_ptr<SplitGradientReducer>> split_reducer =
            SplitGradientReducer::Create(c, split, dp, pp, **world);
        if (!split_reducer.ok()) return split_reducer.status();
        // The one-stage groups (0 and 3) first, then the crossing ones (1, 2), each in layer
        // order.
        const std::vector<int> want_held =
            dp == 0   ? (pp == 0 ? std::vector<int>{0, 1} : std::vector<int>{3, 2})
            : dp == 1 ? (pp == 0 ? std::vector<int>{0} : std::vector<int>{3, 1, 2})
                      : (pp == 0 ? std::vector<int>{0, 1, 2} : std::vector<int>{3});
        if ((*split_reducer)->groups().size() != 4u ||
            (*split_reducer)->held_groups() != want_held) {
          return absl::InternalError("wrong gradient groups");
        }
        model::StageModel split_stage(c, model::LayersOfStage(c, split[dp], pp));
        // Twice: the communicators are reused step after step.
        for (int step = 0; step < 2; ++step) {
          FillGrads(dp, split_stage);
          if (absl::Status s = (*split_reducer)->AllReduce(split_stage, **dp_comm); !s.ok()) {
            return s;
          }
          if (std::string bad = SumMismatch(kDp, split_stage); !bad.empty()) {
            return absl::InternalError(absl::StrCat("split, step ", step, ": ", bad));
          }
        }

        // The even split over the stage's DP communicator sums the same values (bit for bit).
        absl::StatusOr<std::unique_ptr<SplitGradientReducer>> even_reducer =
            SplitGradientReducer::Create(c, even, dp, pp, **world);
        if (!even_reducer.ok()) return even_reducer.status();
        if (!(*even_reducer)->groups().empty()) {
          return absl::InternalError("the even split built gradient groups");
        }
        model::StageModel even_stage(c, model::LayersOfStage(c, even[dp], pp));
        FillGrads(dp, even_stage);
        if (absl::Status s = (*even_reducer)->AllReduce(even_stage, **dp_comm); !s.ok()) return s;
        if (std::string bad = SumMismatch(kDp, even_stage); !bad.empty()) {
          return absl::InternalError(absl::StrCat("even: ", bad));
        }
        for (int l = std::max(even_stage.layers().first, split_stage.layers().first);
             l < std::min(even_stage.layers().end, split_stage.layers().end); ++l) {
          if (std::memcmp(even_stage.grads() + even_stage.LayerOffset(l),
                          split_stage.grads() + split_stage.LayerOffset(l),
                          sizeof(float) * even_stage.LayerSize(l)) != 0) {
            return absl::InternalError(absl::StrCat("layer ", l, " differs from the even sum"));
          }
        }
        // A stage of other layers than the reducer's split gives this rank is refused.
        if (split[dp] != even[dp]) {
          const absl::Status s = (*split_reducer)->AllReduce(even_stage, **dp_comm);
          if (s.code() != absl::StatusCode::kInvalidArgument) {
            return absl::InternalError(absl::StrCat("wrong stage: ", s.ToString()));
          }
        }
        return absl::OkStatus();
      },
      absl::Seconds(90));
  EXPECT_EQ(exits.size(), static_cast<size_t>(kDp * kPp));
  for (const common::testing::RankExit& e : exits) EXPECT_TRUE(e.ok()) << e.rank;
}

}  // namespace
}  // namespace falcon::trainer::directives
