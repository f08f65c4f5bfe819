#include "analysis/detect/environment_shift.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `ranks` columns of `n` iterations: rank r's compute at iteration i is level(r) x (1 + noise)
// with the given coefficient of variation.
ComputeStretch Stretch(int ranks, int n, double cv, uint32_t seed,
                       const std::function<double(int)>& level) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, cv);
  ComputeStretch s;
  s.values.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < n; ++i) s.values[r].push_back(level(r) * (1.0 + noise(rng)));
  }
  return s;
}

// DP = 4 x PP = 2: ranks 0-3 in stage 0, 4-7 in stage 1.
const std::vector<int32_t> kStages = {0, 0, 0, 0, 1, 1, 1, 1};

EnvironmentJudgement Judge(double ratio, const ComputeStretch& before, const ComputeStretch& after,
                           const std::vector<int32_t>& stages = kStages) {
  absl::StatusOr<ComputeBaseline> b = MeasureBaseline(stages, before);
  EXPECT_TRUE(b.ok()) << b.status();
  absl::StatusOr<EnvironmentJudgement> j = JudgeEnvironment(ratio, *b, after, {});
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : EnvironmentJudgement();
}

TEST(EnvironmentShiftTest, EveryRankSlowedAlikeIsTheEnvironment) {
  // A 12% burst on every rank's compute (5% noise), the iteration time up 15%.
  const auto before = Stretch(8, 60, 0.05, 1, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.05, 2, [](int) { return 0.2 * 1.12; });
  const EnvironmentJudgement j = Judge(1.15, before, after);
  EXPECT_TRUE(j.environment) << j.reason;
  EXPECT_NEAR(j.factor, 1.12, 0.05);
  EXPECT_EQ(j.ranks, 8);
  EXPECT_THAT(j.reason, HasSubstr("alike"));
}

TEST(EnvironmentShiftTest, OneSlowRankIsNotTheEnvironment) {
  // Rank 2's compute x1.3: the typical compute does not move.
  const auto before = Stretch(8, 60, 0.05, 3, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.05, 4, [](int r) { return r == 2 ? 0.26 : 0.2; });
  const EnvironmentJudgement j = Judge(1.2, before, after);
  EXPECT_FALSE(j.environment) << j.reason;
  EXPECT_EQ(j.standout_column, 2);
  EXPECT_NEAR(j.standout_excess, 1.3, 0.08);
}

TEST(EnvironmentShiftTest, ARankStandingOutOfALoadedJobIsNotTheEnvironment) {
  // Every rank 15% slower, rank 5 x2: a fault during a load burst.
  const auto before = Stretch(8, 60, 0.03, 5, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.03, 6, [](int r) { return r == 5 ? 0.4 : 0.23; });
  const EnvironmentJudgement j = Judge(1.3, before, after);
  EXPECT_FALSE(j.environment);
  EXPECT_EQ(j.standout_column, 5);
  EXPECT_THAT(j.reason, HasSubstr("over its peers"));
}

TEST(EnvironmentShiftTest, SlowCommunicationWithFlatComputeIsNotTheEnvironment) {
  // A slow link: the iteration time up 10%, compute unchanged (the waiting ranks even compute a
  // little faster with the CPU the others leave).
  const auto before = Stretch(8, 60, 0.05, 7, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.05, 8, [](int) { return 0.19; });
  const EnvironmentJudgement j = Judge(1.10, before, after);
  EXPECT_FALSE(j.environment);
  EXPECT_LT(j.factor, 1.02);
  EXPECT_THAT(j.reason, HasSubstr("below"));
}

TEST(EnvironmentShiftTest, ASlowNodeIsNotTheEnvironment) {
  // Ranks 0 and 1 (one node of four) compute x1.25: a quarter of the ranks moves no typical level.
  const auto before = Stretch(8, 60, 0.03, 9, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.03, 10, [](int r) { return r < 2 ? 0.25 : 0.2; });
  EXPECT_FALSE(Judge(1.2, before, after).environment);
}

TEST(EnvironmentShiftTest, ASlowdownFarLargerThanTheComputeRiseIsNotTheEnvironment) {
  // Compute up 6%, the iteration time up 60%: something else slowed the job.
  const auto before = Stretch(8, 60, 0.01, 11, [](int) { return 0.2; });
  const auto after = Stretch(8, 5, 0.01, 12, [](int) { return 0.212; });
  const EnvironmentJudgement j = Judge(1.6, before, after);
  EXPECT_FALSE(j.environment);
  EXPECT_THAT(j.reason, HasSubstr("too little"));
}

TEST(EnvironmentShiftTest, TwoRanksOneSlowIsNotTheEnvironment) {
  // PP = 2, DP = 1: each rank alone in its stage is compared with the other.
  const auto before = Stretch(2, 60, 0.02, 13, [](int) { return 0.2; });
  const auto after = Stretch(2, 5, 0.02, 14, [](int r) { return r == 0 ? 0.26 : 0.2; });
  EXPECT_FALSE(Judge(1.3, before, after, {0, 1}).environment);
  const auto both = Stretch(2, 5, 0.02, 15, [](int) { return 0.23; });
  EXPECT_TRUE(Judge(1.15, before, both, {0, 1}).environment);
}

TEST(EnvironmentShiftTest, NeedsTwoRanksWithComputeOnBothSides) {
  const auto before = Stretch(1, 30, 0.02, 16, [](int) { return 0.2; });
  const auto after = Stretch(1, 5, 0.02, 17, [](int) { return 0.24; });
  const EnvironmentJudgement j = Judge(1.2, before, after, {0});
  EXPECT_FALSE(j.environment);
  EXPECT_EQ(j.ranks, 1);
  // Columns without values do not count.
  ComputeStretch b = Stretch(3, 30, 0.02, 18, [](int) { return 0.2; });
  ComputeStretch a = Stretch(3, 5, 0.02, 19, [](int) { return 0.24; });
  for (double& v : b.values[1]) v = kNaN;
  for (double& v : a.values[2]) v = kNaN;
  EXPECT_EQ(Judge(1.2, b, a, {-1, -1, -1}).ranks, 1);
}

TEST(EnvironmentShiftTest, MissingIterationsAreSkipped) {
  ComputeStretch before = Stretch(8, 60, 0.03, 20, [](int) { return 0.2; });
  ComputeStretch after = Stretch(8, 6, 0.03, 21, [](int) { return 0.23; });
  for (int r = 0; r < 8; r += 2) before.values[r][r] = kNaN;
  after.values[3][0] = kNaN;
  EXPECT_TRUE(Judge(1.15, before, after).environment);
}

TEST(EnvironmentShiftTest, AnIterationFewRanksReportedIsSkipped) {
  // Two loaded iterations, two nearly healthy, and the latest, which only ranks 0-2 have reported
  // (a rank's own series decides on its summary before the others come in): that one counts for
  // no typical compute, else the load would read as gone.
  const auto before = Stretch(8, 60, 0.0, 26, [](int) { return 0.2; });
  ComputeStretch after;
  after.values.assign(8, {0.25, 0.25, 0.204, 0.204, kNaN});
  for (int r = 0; r < 3; ++r) after.values[r].back() = 0.18;
  EXPECT_TRUE(Judge(1.2, before, after).environment);
  for (int r = 3; r < 4; ++r) after.values[r].back() = 0.18;  // Half the ranks: it counts.
  EXPECT_FALSE(Judge(1.2, before, after).environment);
}

TEST(EnvironmentShiftTest, ABaselineJudgesALaterStretch) {
  // The baseline of the healthy level judges a stretch long after (what is left once the
  // environment recedes): compute back to healthy, the series still 20% up.
  const auto healthy = Stretch(8, 60, 0.03, 22, [](int) { return 0.2; });
  absl::StatusOr<ComputeBaseline> b = MeasureBaseline(kStages, healthy);
  ASSERT_TRUE(b.ok());
  const auto later = Stretch(8, 6, 0.03, 23, [](int) { return 0.2; });
  absl::StatusOr<EnvironmentJudgement> j = JudgeEnvironment(1.2, *b, later, {});
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(j->environment);
}

TEST(EnvironmentShiftTest, RejectsBadInputNamingIt) {
  const auto before = Stretch(2, 10, 0.0, 24, [](int) { return 0.2; });
  EXPECT_THAT(MeasureBaseline(kStages, before).status().message(), HasSubstr("rank columns"));
  ComputeStretch uneven = before;
  uneven.values[1].pop_back();
  EXPECT_THAT(MeasureBaseline({0, 1}, uneven).status().message(), HasSubstr("column 1"));
  ComputeStretch negative = before;
  negative.values[0][3] = -1;
  EXPECT_THAT(MeasureBaseline({0, 1}, negative).status().message(), HasSubstr("iteration 3"));
  absl::StatusOr<ComputeBaseline> b = MeasureBaseline({0, 1}, before);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(JudgeEnvironment(0, *b, before, {}).status().message(), HasSubstr("series_ratio"));
  EXPECT_THAT(JudgeEnvironment(1.2, *b, Stretch(3, 5, 0, 25, [](int) { return 0.2; }), {})
                  .status()
                  .message(),
              HasSubstr("after has 3"));
  EnvironmentOptions bad;
  bad.min_relative_change = 0;
  EXPECT_THAT(JudgeEnvironment(1.2, *b, before, bad).status().message(),
              HasSubstr("min_relative_change"));
}

TEST(FindCommStandoutTest, OneCommunicatorFarAboveTheOthersStandsOut) {
  CommStretches comms;
  comms.comm_ids = {1, 2, 3, 4};
  comms.before = {{1, 1, 1}, {2, 2, 2}, {1, 1.1, 0.9}, {3, 3, 3}};
  comms.after = {{4, 4.2, 3.8}, {2.2, 2.2, 2.2}, {1.1, 1.1, 1.1}, {3.3, 3.4, 3.2}};
  absl::StatusOr<CommStandout> s = FindCommStandout(comms, 0.10, 2.0);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->stands_out);
  EXPECT_EQ(s->comm_id, 1u);
  EXPECT_DOUBLE_EQ(s->factor, 4.0);
  EXPECT_NEAR(s->others, 1.1, 1e-9);
  EXPECT_EQ(s->measured, 4);
  EXPECT_DOUBLE_EQ(s->rise, 3.0);
  // The same rise explains too little of a series' rise of 16 (3 < 16 / 5).
  s = FindCommStandout(comms, 0.10, 16.0);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->stands_out);
  EXPECT_THAT(FindCommStandout(comms, 0.10, std::nan("")).status().message(),
              HasSubstr("series_rise"));
}

TEST(FindCommStandoutTest, AlikeRisesTooFewCommunicatorsAndBadInputStandOutNot) {
  CommStretches alike;
  alike.comm_ids = {1, 2, 3};
  alike.before = {{1, 1}, {2, 2}, {4, 4}};
  alike.after = {{1.4, 1.4}, {2.6, 2.6}, {5.6, 5.6}};  // x1.4, x1.3, x1.4.
  absl::StatusOr<CommStandout> s = FindCommStandout(alike, 0.10, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->stands_out);
  // A communicator with a single value (or none) on a side has no factor: 2 left, too few.
  alike.after[0] = {9};
  alike.after[1] = {9, 9};
  s = FindCommStandout(alike, 0.10, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->measured, 2);
  EXPECT_FALSE(s->stands_out);
  // Far above the others, but itself below 1 + 2θ: no standout (the others sped up).
  CommStretches small;
  small.comm_ids = {1, 2, 3};
  small.before = {{1, 1}, {1, 1}, {1, 1}};
  small.after = {{1.15, 1.15}, {0.5, 0.5}, {0.5, 0.5}};
  s = FindCommStandout(small, 0.10, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->stands_out);
  alike.before.pop_back();
  EXPECT_THAT(FindCommStandout(alike, 0.10, 0).status().message(), HasSubstr("comm_ids"));
  EXPECT_THAT(FindCommStandout(small, 0, 0).status().message(), HasSubstr("theta"));
}

}  // namespace
}  // namespace falcon::analysis::detect
