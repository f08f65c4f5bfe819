#include "analysis/detect/verification.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<double> Levels(std::initializer_list<std::pair<int, double>> runs) {
  std::vector<double> out;
  for (const auto& [n, v] : runs) out.insert(out.end(), n, v);
  return out;
}

TEST(RelativeChangeTest, IsSymmetricAroundTheFasterLevel) {
  EXPECT_DOUBLE_EQ(RelativeChange(1.0, 1.1), RelativeChange(1.1, 1.0));
  EXPECT_NEAR(RelativeChange(100, 110), 0.10, 1e-12);
  EXPECT_EQ(RelativeChange(0, 0), 0);
  EXPECT_EQ(RelativeChange(0, 1), std::numeric_limits<double>::infinity());
}

TEST(ChangeKindNameTest, NamesEveryKind) {
  EXPECT_EQ(ChangeKindName(ChangeKind::kRaw), "raw");
  EXPECT_EQ(ChangeKindName(ChangeKind::kSlowdown), "slowdown");
  EXPECT_EQ(ChangeKindName(ChangeKind::kRecovery), "recovery");
  EXPECT_EQ(ChangeKindName(ChangeKind::kSpeedup), "speedup");
}

TEST(CompareLevelsTest, NeedsMeansAndMediansToMove) {
  const std::vector<double> before(20, 1.0);
  EXPECT_TRUE(CompareLevels(before, {1.2, 1.2, 1.2}, 0.1).significant);
  EXPECT_FALSE(CompareLevels(before, {1.05, 1.05, 1.05}, 0.1).significant);
  // One spike lifts the mean by a third, but not the median.
  const LevelComparison spike = CompareLevels(before, {2.0, 1.0, 1.0}, 0.1);
  EXPECT_NEAR(spike.mean_after, 4.0 / 3, 1e-12);
  EXPECT_EQ(spike.median_after, 1.0);
  EXPECT_FALSE(spike.significant);
  EXPECT_FALSE(CompareLevels({}, {1.0}, 0.1).significant);
}

TEST(CompareLevelsTest, HugeAndTinyLevelsCompareLikeOrdinaryOnes) {
  for (double scale : {1e306, 1e-300}) {
    const std::vector<double> before(20, 1.0 * scale);
    const LevelComparison c = CompareLevels(before, {1.5 * scale, 1.5 * scale, 1.6 * scale}, 0.1);
    EXPECT_TRUE(c.significant) << scale;
    EXPECT_NEAR(c.mean_after / c.mean_before, 4.6 / 3, 1e-9) << scale;
    EXPECT_NEAR(c.median_after / c.median_before, 1.5, 1e-9) << scale;
  }
  // The median of an even count averages two values whose sum overflows.
  EXPECT_EQ(CompareLevels({1e308, 1.5e308}, {1e308}, 0.1).median_before, 1.25e308);
}

TEST(LevelTrackerTest, SlowdownRecoveryAndSpeedup) {
  LevelTracker t(0.1);
  EXPECT_EQ(t.Classify(100, 80), ChangeKind::kSpeedup);
  EXPECT_EQ(t.healthy_level(), 80);
  EXPECT_EQ(t.Classify(80, 120), ChangeKind::kSlowdown);
  EXPECT_TRUE(t.in_slowdown());
  EXPECT_EQ(t.Classify(120, 150), ChangeKind::kSlowdown);  // Worse.
  EXPECT_EQ(t.Classify(150, 100), ChangeKind::kRecovery);  // Partial: still 25% above 80.
  EXPECT_TRUE(t.in_slowdown());
  EXPECT_EQ(t.Classify(100, 82), ChangeKind::kRecovery);
  EXPECT_FALSE(t.in_slowdown());
  EXPECT_EQ(t.healthy_level(), 80);
}

TEST(VerifyChangePointsTest, KeepsRealShiftsAndDropsJitter) {
  // 50 at 100, 30 at 104 (4%: jitter), 30 at 150 (onset), 40 at 100 (recovery), 30 at 80.
  const std::vector<double> s = Levels({{50, 100}, {30, 104}, {30, 150}, {40, 100}, {30, 80}});
  const std::vector<int64_t> cand = {0, 50, 80, 110, 150};
  const std::vector<double> prob = {1, 0.95, 0.97, 0.99, 0.93};
  const auto kept = *VerifyChangePoints(s, cand, prob, VerificationOptions());
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].index, 80);
  EXPECT_EQ(kept[0].kind, ChangeKind::kSlowdown);
  EXPECT_NEAR(kept[0].mean_before, (50 * 100.0 + 30 * 104.0) / 80, 1e-9);
  EXPECT_NEAR(kept[0].ratio, 150 / kept[0].mean_before, 1e-9);
  EXPECT_EQ(kept[0].probability, 0.97);
  EXPECT_EQ(kept[1].index, 110);
  EXPECT_EQ(kept[1].kind, ChangeKind::kRecovery);
  EXPECT_NEAR(kept[1].ratio, 100.0 / 150.0, 1e-9);
  EXPECT_EQ(kept[2].index, 150);
  EXPECT_EQ(kept[2].kind, ChangeKind::kSpeedup);
}

TEST(VerifyChangePointsTest, EnforcesTheMinimumGap) {
  const std::vector<double> s = Levels({{30, 100}, {5, 200}, {30, 300}});
  // A second rise 5 after the first is too close to be kept with the default gap of 10.
  VerificationOptions o;
  auto kept = *VerifyChangePoints(s, {30, 35}, {1, 1}, o);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].index, 30);
  EXPECT_EQ(kept[0].kind, ChangeKind::kSlowdown);
  o.min_gap = 5;
  kept = *VerifyChangePoints(s, {30, 35}, {1, 1}, o);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].mean_after, 200);
  EXPECT_EQ(kept[1].mean_before, 200);
  EXPECT_EQ(kept[1].kind, ChangeKind::kSlowdown);
  // The start of the series counts as kept: a change at 5 is too early.
  EXPECT_THAT(*VerifyChangePoints(Levels({{5, 100}, {40, 200}}), {5}, {1}, VerificationOptions()),
              IsEmpty());
}

TEST(VerifyChangePointsTest, AfterStretchSkipsCandidatesWithinTheGap) {
  // A spike right after the onset proposes a candidate 2 later; the onset's "after" stretch
  // must run past it to the next candidate that could be kept (index 60).
  std::vector<double> s = Levels({{30, 100}, {30, 130}, {30, 100}});
  s[32] = 400;
  const auto kept = *VerifyChangePoints(s, {30, 32, 33, 60}, {1, 1, 1, 1}, VerificationOptions());
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_NEAR(kept[0].mean_after, (29 * 130.0 + 400) / 30, 1e-9);
  EXPECT_EQ(kept[1].index, 60);
}

TEST(VerifyChangePointsTest, RejectsBadInputNamingIt) {
  VerificationOptions o;
  EXPECT_THAT(VerifyChangePoints({}, {}, {}, o).status().message(), HasSubstr("empty"));
  EXPECT_THAT(VerifyChangePoints({1, -2, 3}, {}, {}, o).status().message(), HasSubstr("value 1"));
  EXPECT_THAT(VerifyChangePoints({1, NAN}, {}, {}, o).status().message(), HasSubstr("value 1"));
  EXPECT_THAT(VerifyChangePoints({1, 2}, {1}, {}, o).status().message(),
              HasSubstr("probabilities"));
  EXPECT_THAT(VerifyChangePoints({1, 2, 3}, {2, 1}, {1, 1}, o).status().message(),
              HasSubstr("ascending"));
  o.min_relative_change = 0;
  EXPECT_THAT(VerifyChangePoints({1, 2}, {}, {}, o).status().message(),
              HasSubstr("min_relative_change"));
  o = VerificationOptions();
  o.min_gap = 0;
  EXPECT_THAT(VerifyChangePoints({1, 2}, {}, {}, o).status().message(), HasSubstr("min_gap"));
}

}  // namespace
}  // namespace falcon::analysis::detect
