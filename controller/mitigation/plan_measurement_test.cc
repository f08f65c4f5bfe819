#include "controller/mitigation/plan_measurement.h"

#include <initializer_list>

#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

TEST(PlanMeasurement, MediansAfterTheEffectiveIterationAndJudgesOncePerPlan) {
  PlanMeasurement m(3, 0.97);
  EXPECT_EQ(m.from(), -1);
  EXPECT_FALSE(m.Add(10, absl::Milliseconds(100)).has_value());  // No plan measured.
  m.Restart(10);
  EXPECT_EQ(m.from(), 10);
  EXPECT_FALSE(m.Add(10, absl::Milliseconds(100)).has_value());  // Not after it.
  EXPECT_EQ(*m.Add(11, absl::Milliseconds(120)), absl::Milliseconds(120));
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140)).has_value());  // Window not full.
  EXPECT_EQ(*m.Add(12, absl::Milliseconds(110)), absl::Milliseconds(115));
  EXPECT_EQ(*m.Add(13, absl::Milliseconds(500)), absl::Milliseconds(120));
  std::optional<PlanMeasurement::Judgement> j = m.Judge(absl::Milliseconds(140));
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->median, absl::Milliseconds(120));
  EXPECT_TRUE(j->helped);
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140)).has_value());  // Once per plan.
  // The window slides: the oldest sample leaves.
  EXPECT_EQ(*m.Add(14, absl::Milliseconds(500)), absl::Milliseconds(500));
}

// A window of 2 at 0.97, measuring a plan effective at iteration 0: `ms` are iterations 1, 2...
PlanMeasurement MeasuredOver(std::initializer_list<int> ms) {
  PlanMeasurement m(2, 0.97);
  m.Restart(0);
  int64_t iteration = 0;
  for (int v : ms) m.Add(++iteration, absl::Milliseconds(v));
  return m;
}

TEST(PlanMeasurement, NoFasterThanTheFractionOfSlowDidNotHelp) {
  PlanMeasurement m = MeasuredOver({136, 136});
  std::optional<PlanMeasurement::Judgement> j = m.Judge(absl::Milliseconds(140));
  ASSERT_TRUE(j.has_value());
  // 136 >= 0.97 x 140 = 135.8, yet faster than slow: undecided, measured over 3 windows.
  EXPECT_FALSE(j->final);
  EXPECT_EQ(j->iterations, 2);
  EXPECT_FALSE(m.Due());
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140)).has_value());
  for (int64_t i = 3; i <= 6; ++i) m.Add(i, absl::Milliseconds(136));
  j = m.Judge(absl::Milliseconds(140));
  ASSERT_TRUE(j.has_value());
  EXPECT_TRUE(j->final);
  EXPECT_EQ(j->iterations, 6);
  EXPECT_FALSE(j->helped);
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140)).has_value());  // Once.
  // A new plan is judged afresh.
  m.Restart(5);
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140)).has_value());
  m.Add(6, absl::Milliseconds(100));
  m.Add(7, absl::Milliseconds(100));
  EXPECT_TRUE(m.Judge(absl::Milliseconds(140))->helped);
}

TEST(PlanMeasurement, NoFasterThanSlowIsJudgedOnTheFirstWindow) {
  PlanMeasurement m = MeasuredOver({140, 150});
  std::optional<PlanMeasurement::Judgement> j = m.Judge(absl::Milliseconds(140));
  ASSERT_TRUE(j.has_value());
  EXPECT_TRUE(j->final);
  EXPECT_FALSE(j->helped);
}

// The longer window holds the plan's first iterations: its median outvotes a slow start, and
// after the judgement the reported median is the latest window's again.
TEST(PlanMeasurement, TheLongerWindowJudgesTheFirstIterationsOfThePlan) {
  PlanMeasurement m = MeasuredOver({138, 138});
  EXPECT_FALSE(m.Judge(absl::Milliseconds(140))->final);
  m.Add(3, absl::Milliseconds(100));
  m.Add(4, absl::Milliseconds(100));
  m.Add(5, absl::Milliseconds(100));
  EXPECT_EQ(*m.Add(6, absl::Milliseconds(100)), absl::Milliseconds(100));
  std::optional<PlanMeasurement::Judgement> j = m.Judge(absl::Milliseconds(140));
  ASSERT_TRUE(j.has_value());
  EXPECT_TRUE(j->final);
  EXPECT_TRUE(j->helped);
  EXPECT_EQ(j->median, absl::Milliseconds(100));
  EXPECT_EQ(*m.Add(7, absl::Milliseconds(200)), absl::Milliseconds(150));
}

// Load from outside the job during the window is divided out first: slower than slow under a x1.3
// load is a plan that helps; a plan that only looks fast because load went away is no help.
TEST(PlanMeasurement, OutsideLoadIsDividedOutBeforeJudging) {
  PlanMeasurement m(1, 0.97);
  m.Restart(10);
  m.Add(11, absl::Milliseconds(156));
  std::optional<PlanMeasurement::Judgement> j = m.Judge(absl::Milliseconds(140), 1.3);
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->median, absl::Milliseconds(156));
  EXPECT_EQ(j->judged, absl::Milliseconds(120));
  EXPECT_TRUE(j->helped);
  m.Restart(20);
  m.Add(21, absl::Milliseconds(112));
  j = m.Judge(absl::Milliseconds(140), 0.8);
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->judged, absl::Milliseconds(140));
  EXPECT_FALSE(j->helped);
}

}  // namespace
}  // namespace falcon::controller::mitigation
