#include "analysis/detect/imbalance.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

// `steps` iterations of a DP=`dp` x PP=`pp` job (rank = stage * dp + replica) whose compute in
// seconds is `compute(step, stage, replica)`.
std::vector<BlameInput> Job(int steps, int dp, int pp,
                            const std::function<double(int, int, int)>& compute) {
  std::vector<BlameInput> out;
  for (int i = 0; i < steps; ++i) {
    BlameInput step;
    step.step = i;
    for (int s = 0; s < pp; ++s) {
      for (int d = 0; d < dp; ++d) {
        step.ranks.push_back({s * dp + d, s, absl::Seconds(compute(i, s, d))});
      }
    }
    out.push_back(std::move(step));
  }
  return out;
}

// Deterministic jitter in [-a, a].
double Wobble(int i, int s, int d, double a) {
  return a * (static_cast<double>((i * 7919 + s * 104729 + d * 1299709) % 2001) / 1000.0 - 1.0);
}

TEST(ImbalanceTest, BalancedSteadyJobHasNoFinding) {
  auto r = AnalyzeImbalance(
      Job(30, 4, 4, [](int i, int s, int d) { return 1.0 + Wobble(i, s, d, 0.02); }));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 30);
  EXPECT_EQ(r->stages, 4);
  EXPECT_EQ(r->ranks, 16);
  EXPECT_FALSE(r->stage_imbalance.has_value());
  EXPECT_FALSE(r->jitter.has_value());
  EXPECT_TRUE(r->stragglers.empty());
  EXPECT_EQ(DescribeImbalance(*r),
            std::vector<std::string>{"no workload imbalance and no persistent straggler"});
}

TEST(ImbalanceTest, AHeavyLastStageIsAStageImbalanceNotAStraggler) {
  // As the ByteDance ST trace: the last stage (LM head and loss) computes ~1.6x the others.
  auto r = AnalyzeImbalance(Job(30, 2, 4, [](int i, int s, int d) {
    return (s == 3 ? 1.38 : 0.85) + Wobble(i, s, d, 0.01);
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->stage_imbalance.has_value());
  EXPECT_EQ(r->stage_imbalance->stage, 3);
  EXPECT_NEAR(r->stage_imbalance->ratio, 1.38 / 0.85, 0.03);
  EXPECT_DOUBLE_EQ(r->stage_imbalance->slowest_share, 1.0);
  // Mean of the stages (0.85 * 3 + 1.38) / 4 = 0.9825: shed 1 - 0.9825 / 1.38 = 29%.
  EXPECT_NEAR(r->stage_imbalance->shed_fraction, 0.288, 0.01);
  EXPECT_TRUE(r->stragglers.empty());
  EXPECT_FALSE(r->jitter.has_value());
  const std::vector<std::string> text = DescribeImbalance(*r);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_NE(text[0].find("stage imbalance: stage 3 computes x1.6"), std::string::npos) << text[0];
  EXPECT_NE(text[0].find("move about 29% of its compute (layers)"), std::string::npos) << text[0];
}

TEST(ImbalanceTest, OneSlowRankIsAPersistentStragglerAndNotAStageImbalance) {
  // As the ByteDance AR trace: rank 0 (stage 0) at 2.3x, its three DP peers normal.
  auto r = AnalyzeImbalance(Job(40, 4, 4, [](int i, int s, int d) {
    return (s == 0 && d == 0 ? 2.3 : 1.0) + Wobble(i, s, d, 0.02);
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->stage_imbalance.has_value());  // Stage 0's other ranks are fine.
  EXPECT_FALSE(r->jitter.has_value());
  ASSERT_EQ(r->stragglers.size(), 1u);
  EXPECT_EQ(r->stragglers[0].rank, 0);
  EXPECT_DOUBLE_EQ(r->stragglers[0].slow_share, 1.0);
  EXPECT_NEAR(r->stragglers[0].ratio, 2.3, 0.1);
}

TEST(ImbalanceTest, WorkThatVariesAcrossReplicasIsJitterWithNoRankBlamed) {
  // As sequence-length imbalance: each iteration a different replica gets the long sequences.
  auto r = AnalyzeImbalance(Job(40, 8, 2, [](int i, int s, int d) {
    return (d == i % 8 ? 1.5 : 1.0) + Wobble(i, s, d, 0.03);
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->jitter.has_value());
  EXPECT_EQ(r->jitter->ranks_sometimes_slow, 16);
  EXPECT_LT(r->jitter->max_slow_share, 0.5);
  EXPECT_GT(r->jitter->median_spread, 0.4);
  EXPECT_TRUE(r->stragglers.empty());
  EXPECT_FALSE(r->stage_imbalance.has_value());
  EXPECT_NE(DescribeImbalance(*r)[0].find("no rank is to blame"), std::string::npos);
}

TEST(ImbalanceTest, WithTwoRanksPerStageASlowRankIsComparedWithItsPeerNotTheirMean) {
  // DP=2: the median of both would read a x1.2 rank as x1.09, under the threshold.
  auto r = AnalyzeImbalance(Job(30, 2, 4, [](int i, int s, int d) {
    return (s == 1 && d == 1 ? 1.2 : 1.0) + Wobble(i, s, d, 0.01);
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->stragglers.size(), 1u);
  EXPECT_EQ(r->stragglers[0].rank, 3);
  EXPECT_NEAR(r->stragglers[0].ratio, 1.2, 0.03);
}

TEST(ImbalanceTest, AStageWithOneRankCannotTellAPartitionFromASlowGpu) {
  auto r = AnalyzeImbalance(Job(
      30, 1, 4, [](int i, int s, int d) { return (s == 2 ? 1.5 : 1.0) + Wobble(i, s, d, 0.01); }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->stage_imbalance.has_value());
  EXPECT_EQ(r->stage_imbalance->ranks, 1);
  EXPECT_NE(DescribeImbalance(*r)[0].find("cannot be told apart"), std::string::npos);
}

TEST(ImbalanceTest, AFailSlowThatBeganOrEndedInTheWindowIsFoundWithItsSteps) {
  // Slow (x1.5) in steps 24-39 of 40 only: 40% of the steps, one long run.
  auto late = AnalyzeImbalance(Job(40, 4, 2, [](int i, int s, int d) {
    return (s == 1 && d == 1 && i >= 24 ? 1.5 : 1.0) + Wobble(i, s, d, 0.01);
  }));
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_EQ(late->stragglers.size(), 1u);
  EXPECT_EQ(late->stragglers[0].rank, 5);
  EXPECT_EQ(late->stragglers[0].first_step, 24);
  EXPECT_EQ(late->stragglers[0].last_step, 39);
  EXPECT_NEAR(late->stragglers[0].ratio, 1.5, 0.03);  // While slow, not over the whole window.
  EXPECT_NE(DescribeImbalance(*late)[0].find("longest stretch: steps 24-39"), std::string::npos)
      << DescribeImbalance(*late)[0];
  // Short slow stretches scattered over the window are not a straggler.
  auto scattered = AnalyzeImbalance(Job(40, 4, 2, [](int i, int s, int d) {
    return (s == 1 && d == 1 && i % 5 == 0 ? 1.5 : 1.0) + Wobble(i, s, d, 0.01);
  }));
  ASSERT_TRUE(scattered.ok());
  EXPECT_TRUE(scattered->stragglers.empty());
}

TEST(ImbalanceTest, ARankThatChangesStageIsAnError) {
  auto steps = Job(20, 2, 2, [](int, int, int) { return 1.0; });
  steps[12].ranks[0].group = 1;
  EXPECT_NE(AnalyzeImbalance(steps).status().message().find(
                "rank 0 is in stage 0 at step 0 and in stage 1 at step 12"),
            std::string::npos)
      << AnalyzeImbalance(steps).status();
}

TEST(ImbalanceTest, BadInputAndOptions) {
  EXPECT_NE(AnalyzeImbalance(Job(5, 2, 2, [](int, int, int) { return 1.0; }))
                .status()
                .message()
                .find("at least 10 iterations"),
            std::string::npos);
  auto negative = Job(20, 2, 2, [](int i, int, int d) { return i == 7 && d == 1 ? -1.0 : 1.0; });
  EXPECT_NE(AnalyzeImbalance(negative).status().message().find("step 7 rank 1: negative"),
            std::string::npos);
  ImbalanceOptions bad;
  bad.persistent_share = 0;
  EXPECT_NE(AnalyzeImbalance({}, bad).status().message().find("persistent_share"),
            std::string::npos);
}

}  // namespace
}  // namespace falcon::analysis::detect
