#include "controller/detection/job_series.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::controller::detection {
namespace {

TEST(JobSeriesAssemblerTest, MaxOverRanksOnceAllReported) {
  JobSeriesAssembler a(3);
  std::vector<JobPoint> out;
  a.Add(0, 100, 0, &out);
  a.Add(0, 300, 1, &out);
  EXPECT_TRUE(out.empty());
  a.Add(0, 200, 0, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].iteration, 0);
  EXPECT_EQ(out[0].iteration_time_ns, 300);
  EXPECT_EQ(out[0].plan_version, 1);
  EXPECT_EQ(out[0].ranks_reported, 3u);
  a.Add(0, 999, 0, &out);  // Late: already complete.
  EXPECT_EQ(out.size(), 1u);
}

TEST(JobSeriesAssemblerTest, SkippedIterationCompletesWhenALaterOneDoes) {
  JobSeriesAssembler a(2);
  std::vector<JobPoint> out;
  a.Add(1, 10, 0, &out);  // Rank A reports 1 and 2; rank B skips 1.
  a.Add(2, 20, 0, &out);
  a.Add(2, 25, 0, &out);  // Rank B reports 2: iteration 1 can no longer complete.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].iteration, 1);
  EXPECT_EQ(out[0].ranks_reported, 1u);
  EXPECT_EQ(out[1].iteration, 2);
  EXPECT_EQ(out[1].iteration_time_ns, 25);
}

TEST(JobSeriesAssemblerTest, SilentRankDoesNotBlockForever) {
  JobSeriesAssembler a(2, /*max_pending=*/4);
  std::vector<JobPoint> out;
  for (int64_t i = 0; i < 10; ++i) a.Add(i, 100 + i, 0, &out);
  EXPECT_EQ(a.pending(), 4u);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[5].iteration, 5);
  EXPECT_EQ(a.last_completed(), 5);
}

}  // namespace
}  // namespace falcon::controller::detection
