#include "controller/mitigation/compute_probe.h"

#include "controller/mitigation/planner.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

// DP=4 x PP=2: rank r at dp = r % 4, pp = r / 4. Rank 5 (dp 1, stage 1) is the culprit; its
// stage peers are 4, 6 and 7.
analysis::plan::Layout Grid() {
  std::vector<analysis::plan::RankPlacement> ranks;
  for (int r = 0; r < 8; ++r) {
    analysis::plan::RankPlacement p;
    p.rank = r;
    p.node = "node" + std::to_string(r / 2);
    p.dp = r % 4;
    p.pp = r / 4;
    ranks.push_back(p);
  }
  return *analysis::plan::Layout::Create(ranks);
}

class ComputeProbeTest : public ::testing::Test {
 protected:
  ComputeProbeTest() : probe_({5}, 3) { probe_.SetLayout(Grid(), {8, 8, 8, 8}); }

  // One summary per rank of stage 1: 1 ms per micro-batch, the culprit `factor` slower.
  void Iteration(double factor, const std::vector<uint32_t>& plan = {8, 8, 8, 8}) {
    for (uint32_t r : {4u, 5u, 6u, 7u}) {
      const double per = r == 5 ? 1e6 * factor : 1e6;
      ASSERT_TRUE(probe_.Add(r, static_cast<int64_t>(per * plan[r % 4]), plan));
    }
  }

  ComputeProbe probe_;
};

TEST_F(ComputeProbeTest, RatioAgainstStagePeersPerMicroBatch) {
  EXPECT_FALSE(ComputeProbe({5}, 3).has_layout());
  EXPECT_TRUE(probe_.has_layout());
  Iteration(1.4);
  Iteration(1.4);
  EXPECT_EQ(probe_.Ratio(5, 3), 0);  // Two samples: too few.
  Iteration(1.4);
  EXPECT_NEAR(probe_.Ratio(5, 3), 1.4, 1e-9);
  EXPECT_NEAR(probe_.WorstCulpritRatio(3), 1.4, 1e-9);
  EXPECT_EQ(probe_.Ratio(5, ComputeProbe::kWindow), 0);
  // Per micro-batch: an uneven plan (group 1 runs 4) does not read as a speed-up.
  Iteration(1.4, {10, 4, 9, 9});
  Iteration(1.4, {10, 4, 9, 9});
  EXPECT_NEAR(probe_.Ratio(5, ComputeProbe::kWindow), 1.4, 1e-9);
  // A plan of the wrong size falls back to the even split; out-of-range ranks are refused.
  EXPECT_TRUE(probe_.Add(4, 8'000'000, {16, 16}));
  EXPECT_FALSE(probe_.Add(8, 1'000'000, {8, 8, 8, 8}));
  EXPECT_FALSE(probe_.Add(4, 1'000'000, {0, 8, 8, 8}));
  probe_.ClearSamples();
  EXPECT_EQ(probe_.Ratio(5, 1), 0);
  EXPECT_TRUE(probe_.IsCulprit(5));
  EXPECT_FALSE(probe_.IsCulprit(4));
}

// After an S2L re-split the culprit's stage holds fewer blocks than its peers' (16 blocks, even
// 8+8; dp 1 re-split 11+5, so rank 5 holds 5 blocks against its peers' 8): per micro-batch alone
// its x1.4 GPU would read x1.4 x 5/8 = 0.875, "recovered" (the event reverted while still slow),
// and the plan sized on it too light. Per block it stays x1.4; and a culprit back at its peers'
// speed under the split reads 1.0, not 0.625.
TEST(ComputeProbePerBlockTest, ARatioUnderALayerSplitIsPerBlock) {
  ComputeProbe probe({5}, 3);
  probe.SetLayout(Grid(), {8, 8, 8, 8}, /*pipeline_blocks=*/16);
  google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit> split;
  for (int d = 0; d < 4; ++d) {
    falcon::v1::ReplicaSplit* r = split.Add();
    r->add_stage_blocks(d == 1 ? 11 : 8);
    r->add_stage_blocks(d == 1 ? 5 : 8);
  }
  EXPECT_EQ(probe.BlocksHeld(1, 1, split), 5u);
  EXPECT_EQ(probe.BlocksHeld(0, 1, split), 8u);
  EXPECT_EQ(probe.BlocksHeld(1, 1, {}), 8u);  // No split in force: even.
  // 0.1 ms per micro-batch and block; the culprit's GPU x1.4; the S2L plan's micro-batches.
  const std::vector<uint32_t> plan = {9, 5, 9, 9};
  auto iteration = [&](double factor) {
    for (uint32_t r : {4u, 5u, 6u, 7u}) {
      const double per_block = r == 5 ? 1e5 * factor : 1e5;
      const double compute = per_block * plan[r % 4] * probe.BlocksHeld(r % 4, 1, split);
      ASSERT_TRUE(probe.Add(r, static_cast<int64_t>(compute), plan, split));
    }
  };
  for (int i = 0; i < 5; ++i) iteration(1.4);
  EXPECT_NEAR(probe.Ratio(5, ComputeProbe::kWindow), 1.4, 1e-9);
  EXPECT_EQ(probe.Observe(5, 0.1).state, ComputeProbe::State::kSlow);
  // Per micro-batch (no split given) the same samples would have read about 0.875.
  ComputeProbe per_micro_batch({5}, 3);
  per_micro_batch.SetLayout(Grid(), {8, 8, 8, 8});
  for (int i = 0; i < 5; ++i) {
    for (uint32_t r : {4u, 5u, 6u, 7u}) {
      const double per_block = r == 5 ? 1.4e5 : 1e5;
      per_micro_batch.Add(r, static_cast<int64_t>(per_block * plan[r % 4] * (r == 5 ? 5 : 8)),
                          plan);
    }
  }
  EXPECT_NEAR(per_micro_batch.Ratio(5, ComputeProbe::kWindow), 0.875, 1e-9);
  // The fault clears under the split: per block the culprit is at its peers' speed, and clears.
  ComputeProbe::State state = ComputeProbe::State::kTooFew;
  for (int i = 0; i < 5; ++i) {
    iteration(1.0);
    state = probe.Observe(5, 0.1).state;
  }
  EXPECT_NEAR(probe.Ratio(5, ComputeProbe::kWindow), 1.0, 1e-9);
  EXPECT_EQ(state, ComputeProbe::State::kCleared);
}

// The culprit's stage peers, per micro-batch, whatever their group's share: 1 ms; neither the
// culprit's x1.4 nor another stage moves it.
TEST_F(ComputeProbeTest, PeerLevelIsTheStagePeersComputePerMicroBatch) {
  EXPECT_EQ(probe_.PeerLevel(), 0);
  Iteration(1.4);
  EXPECT_NEAR(probe_.PeerLevel(), 1e6, 1e-3);
  Iteration(1.4, {10, 4, 9, 9});
  Iteration(1.4, {10, 4, 9, 9});
  EXPECT_NEAR(probe_.PeerLevel(), 1e6, 1e-3);
  EXPECT_TRUE(probe_.Add(4, 9'000'000, {8, 8, 8, 8}));  // Rank 4 alone slower: the median holds.
  EXPECT_NEAR(probe_.PeerLevel(), 1e6, 1e-3);
  for (uint32_t r : {0u, 1u, 2u, 3u}) EXPECT_TRUE(probe_.Add(r, 80'000'000, {8, 8, 8, 8}));
  EXPECT_NEAR(probe_.PeerLevel(), 1e6, 1e-3);  // Stage 0 waits for stage 1: not counted.
}

TEST_F(ComputeProbeTest, ClearsOnlyAfterSeenSlowAndAStreakBelowHalfTheThreshold) {
  // Healthy from the start: never cleared (it was never seen slow).
  for (int i = 0; i < 6; ++i) Iteration(1.0);
  EXPECT_EQ(probe_.Observe(5, 0.2).state, ComputeProbe::State::kNotClear);
  probe_.ClearSamples();
  for (int i = 0; i < 5; ++i) Iteration(1.4);
  EXPECT_EQ(probe_.Observe(5, 0.2).state, ComputeProbe::State::kSlow);
  // Between 1 + 0.1 and 1 + 0.2: not clear yet.
  for (int i = 0; i < 5; ++i) Iteration(1.15);
  EXPECT_EQ(probe_.Observe(5, 0.2).state, ComputeProbe::State::kNotClear);
  for (int i = 0; i < 5; ++i) Iteration(1.0);
  ComputeProbe::Reading r = probe_.Observe(5, 0.2);
  EXPECT_EQ(r.state, ComputeProbe::State::kClearing);
  EXPECT_EQ(r.streak, 1);
  EXPECT_EQ(probe_.Observe(5, 0.2).state, ComputeProbe::State::kClearing);
  r = probe_.Observe(5, 0.2);
  EXPECT_EQ(r.state, ComputeProbe::State::kCleared);
  EXPECT_NEAR(r.ratio, 1.0, 1e-9);
  // A relapse resets the streak.
  for (int i = 0; i < 5; ++i) Iteration(1.3);
  EXPECT_EQ(probe_.Observe(5, 0.2).state, ComputeProbe::State::kSlow);
  for (int i = 0; i < 5; ++i) Iteration(1.0);
  EXPECT_EQ(probe_.Observe(5, 0.2).streak, 1);
}

// Compute per iteration F + m x c: divided by m alone, the group S2 gave fewer micro-batches
// reads slower while healthy; the stage's fixed cost, fitted from the peers' counts before and
// under the plan, is taken out.
TEST_F(ComputeProbeTest, TheStagesFixedCostIsTakenOutOfThePerMicroBatchRatio) {
  constexpr double kFixed = 1.2e6, kPer = 1e6;  // 1.2 micro-batches: 13% of the least compute.
  auto iteration = [&](const std::vector<uint32_t>& plan, double culprit_factor, double load) {
    for (uint32_t r : {4u, 5u, 6u, 7u}) {
      const double per = r == 5 ? kPer * culprit_factor : kPer;
      const double compute = load * (kFixed + per * plan[r % 4]);
      ASSERT_TRUE(probe_.Add(r, static_cast<int64_t>(compute), plan));
    }
  };
  for (int i = 0; i < 5; ++i) iteration({8, 8, 8, 8}, 2.0, 1.0);
  EXPECT_EQ(probe_.FixedCostNs(5), 0) << "one count so far: no fit";
  const double before = probe_.Ratio(5, ComputeProbe::kWindow);
  EXPECT_NEAR(before, (1.2 + 16.0) / (1.2 + 8.0), 1e-9) << "no fit: per micro-batch with F in it";
  probe_.ClearSamples();  // The plan takes effect: group 1 (the culprit's) runs 4.
  for (int i = 0; i < 5; ++i) iteration({10, 4, 9, 9}, 1.0, 1.0);  // And the fault ended.
  EXPECT_NEAR(probe_.FixedCostNs(5), kFixed, 1e3);
  EXPECT_NEAR(probe_.Ratio(5, ComputeProbe::kWindow), 1.0, 1e-3)
      << "healthy under the plan (F / m alone: x" << (1.2 + 4.0) / 4 / ((1.2 + 9.0) / 9) << ")";
  // Still slow: x2 per micro-batch, as before the plan.
  for (int i = 0; i < 5; ++i) iteration({10, 4, 9, 9}, 2.0, 1.0);
  EXPECT_NEAR(probe_.Ratio(5, ComputeProbe::kWindow), 2.0, 1e-3);
  // More load from outside under the plan than before it: the fit gives no sound F (negative),
  // and the ratio is per micro-batch as before.
  ComputeProbe loaded({5}, 3);
  loaded.SetLayout(Grid(), {8, 8, 8, 8});
  for (int i = 0; i < 5; ++i) {
    for (uint32_t r : {4u, 6u, 7u}) ASSERT_TRUE(loaded.Add(r, 11'000'000, {8, 8, 8, 8}));
  }
  for (int i = 0; i < 5; ++i) {
    for (uint32_t r : {4u, 6u, 7u}) {
      const std::vector<uint32_t> plan = {10, 4, 9, 9};
      ASSERT_TRUE(loaded.Add(r, static_cast<int64_t>(3 * (kFixed + kPer * plan[r % 4])), plan));
    }
  }
  EXPECT_EQ(loaded.FixedCostNs(5), 0);
  // A fit above kMaxFixedShare of the least compute is no fixed cost (load taken for one).
  ComputeProbe big({5}, 3);
  big.SetLayout(Grid(), {8, 8, 8, 8});
  for (const std::vector<uint32_t>& plan :
       {std::vector<uint32_t>{8, 8, 8, 8}, std::vector<uint32_t>{10, 4, 9, 9}}) {
    for (int i = 0; i < 5; ++i) {
      for (uint32_t r : {4u, 6u, 7u}) {
        ASSERT_TRUE(big.Add(r, static_cast<int64_t>(4e6 + kPer * plan[r % 4]), plan));
      }
    }
  }
  EXPECT_EQ(big.FixedCostNs(5), 0);
}

TEST(ComputeProbe, NoPeersNoRatio) {
  ComputeProbe probe({4, 5, 6, 7}, 3);  // The whole stage is culprit.
  probe.SetLayout(Grid(), {8, 8, 8, 8});
  for (int i = 0; i < 5; ++i) {
    for (uint32_t r : {4u, 5u, 6u, 7u}) ASSERT_TRUE(probe.Add(r, 8'000'000, {8, 8, 8, 8}));
  }
  EXPECT_EQ(probe.Ratio(5, 3), 0);
  EXPECT_EQ(probe.Observe(5, 0.2).state, ComputeProbe::State::kTooFew);
}

}  // namespace
}  // namespace falcon::controller::mitigation
