// The loss of the hybrid-parallel trainer falls over 200 steps on real English text.
#include <cstdio>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

TEST(ConvergenceTest, LossFallsOver200Steps) {
  testing::JobSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  spec.micro_batches = 4;
  spec.steps = 200;
  spec.timeout = absl::Seconds(55);
  const testing::JobRun run = testing::RunJob(spec, "converge");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  const std::vector<double> loss = testing::LossCurve(testing::ReadJsonLines(run.json_log));
  ASSERT_EQ(loss.size(), 200u);
  const double first = std::accumulate(loss.begin(), loss.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(loss.end() - 20, loss.end(), 0.0) / 20;
  // Starts near ln(vocab) (a uniform guess over ~76 characters is 4.3 nats) and learns English
  // character statistics (a unigram model alone reaches ~3.1).
  std::printf("loss: first 10 steps %.3f, last 20 steps %.3f\n", first, last);
  EXPECT_GT(first, 3.5);
  EXPECT_LT(last, 2.6) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace falcon::trainer
