#include "deploy/demo/fault_schedule.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace falcon::deploy::demo {
namespace {

InjectedFault Window(int64_t from, int64_t to) {
  InjectedFault f;
  f.rank = 2;
  f.from_iteration = from;
  f.to_iteration = to;
  return f;
}

TEST(FaultScheduleTest, AppliesBeforeTheFirstSlowIterationAndRemovesAtTheEnd) {
  FaultSchedule s({Window(10, 20), Window(15, 30)});
  EXPECT_TRUE(s.Advance(5).empty());
  auto steps = s.Advance(9);  // Iteration 10 runs next.
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].fault, 0);
  EXPECT_TRUE(steps[0].apply);
  EXPECT_TRUE(s.Advance(9).empty()) << "each step once";
  steps = s.Advance(19);  // Fault 1 starts, fault 0 ends.
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_TRUE(steps[0].apply);
  EXPECT_EQ(steps[0].fault, 1);
  EXPECT_FALSE(steps[1].apply);
  EXPECT_EQ(steps[1].fault, 0);
  EXPECT_EQ(s.Active(), std::vector<int>{1});
}

TEST(FaultScheduleTest, AWindowJumpedOverIsNeverApplied) {
  FaultSchedule s({Window(10, 12)});
  EXPECT_TRUE(s.Advance(40).empty());
  EXPECT_TRUE(s.Active().empty());
}

// Held until detection is armed: a fault due at 10 waits for armed + kArmedMargin and keeps its
// length (10 iterations); one due after that runs where its window says.
TEST(FaultScheduleTest, AHeldFaultWaitsForDetectionArmedAndKeepsItsLength) {
  FaultSchedule s({Window(10, 20), Window(60, 70)});
  s.HoldUntilArmed();
  EXPECT_TRUE(s.Advance(9).empty()) << "not armed yet";
  EXPECT_TRUE(s.Advance(20).empty()) << "past its window, yet held, not dropped";
  EXPECT_TRUE(s.Waiting());
  s.Armed(25);
  EXPECT_FALSE(s.Waiting());
  EXPECT_TRUE(s.Advance(33).empty()) << "within the margin";
  auto steps = s.Advance(34);  // Iteration 35 = 25 + kArmedMargin runs next.
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_TRUE(steps[0].apply);
  EXPECT_EQ(steps[0].fault, 0);
  EXPECT_EQ(s.from(0), 25 + FaultSchedule::kArmedMargin);
  EXPECT_EQ(s.to(0), 45);
  EXPECT_TRUE(s.Advance(43).empty());
  steps = s.Advance(44);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_FALSE(steps[0].apply);
  steps = s.Advance(59);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].fault, 1);
  EXPECT_EQ(s.from(1), 60) << "armed long before: on time";
  EXPECT_EQ(s.to(1), 70);
}

TEST(IterationTailTest, ReadsOnlyCompleteAppendedLines) {
  const std::string path = ::testing::TempDir() + "/train.jsonl";
  { std::ofstream(path, std::ios::trunc); }
  IterationTail tail(path);
  EXPECT_EQ(tail.Latest(), -1);
  std::ofstream out(path, std::ios::app);
  out << R"({"iteration":0,"rank":0})"
      << "\n"
      << R"({"iteration":1,"ra)" << std::flush;
  EXPECT_EQ(tail.Latest(), 0);
  out << R"(nk":0})"
      << "\n"
      << "not json\n"
      << std::flush;
  EXPECT_EQ(tail.Latest(), 1);
  EXPECT_EQ(tail.malformed_lines(), 1);
  EXPECT_EQ(IterationTail(::testing::TempDir() + "/missing.jsonl").Latest(), -1);
}

}  // namespace
}  // namespace falcon::deploy::demo
