#include "analysis/plan/pipeline_cost.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PipelineCostTest, UniformPipelineHasTextbookBubble) {
  absl::StatusOr<JobTiming> job =
      UniformJob(2, 4, 8, absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration());
  ASSERT_TRUE(job.ok());
  absl::StatusOr<IterationEstimate> e = EstimateIteration(*job);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->iteration, absl::Seconds(8 + 4 - 1));  // (m + P − 1)·c
  EXPECT_EQ(e->replica_bubble[0], absl::Seconds(3));  // (P − 1)·c
}

TEST(PipelineCostTest, PaperStragglerToyExample) {
  // FALCON paper §5, straggler consolidation example: micro-batch 1 s, slow 1.5 s, healthy
  // iteration 6 s; two stragglers in two stages of a pipeline: 8.5 s; both in one stage: 8 s. That
  // is P = 3, m = 4.
  PipelineTiming healthy{{absl::Seconds(1), absl::Seconds(1), absl::Seconds(1)},
                         {absl::ZeroDuration(), absl::ZeroDuration()},
                         4};
  EXPECT_EQ(PipelineTime(healthy), absl::Seconds(6));
  PipelineTiming two_stages = healthy;
  two_stages.stage_compute[1] = two_stages.stage_compute[2] = absl::Seconds(1.5);
  EXPECT_EQ(PipelineTime(two_stages), absl::Seconds(8.5));
  PipelineTiming one_stage = healthy;
  one_stage.stage_compute[1] = absl::Seconds(1.5);
  EXPECT_EQ(PipelineTime(one_stage), absl::Seconds(8));
}

TEST(PipelineCostTest, P2pAndAllReduceAddUp) {
  JobTiming job;
  job.replicas.push_back(
      PipelineTiming{{absl::Seconds(1), absl::Seconds(1)}, {absl::Milliseconds(100)}, 3});
  job.replicas.push_back(
      PipelineTiming{{absl::Seconds(1), absl::Seconds(2)}, {absl::Milliseconds(100)}, 2});
  job.stage_allreduce = {absl::Milliseconds(300), absl::Milliseconds(500)};
  // Replica 0: cycles 1.1, 1.1 -> 2.2 + 2 * 1.1 = 4.4. Replica 1: 1.1, 2.1 -> 3.2 + 2.1 = 5.3.
  absl::StatusOr<IterationEstimate> e = EstimateIteration(job);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->replica_pipeline, ElementsAre(absl::Seconds(4.4), absl::Seconds(5.3)));
  EXPECT_EQ(e->slowest_replica, 1);
  EXPECT_EQ(e->allreduce, absl::Milliseconds(500));
  EXPECT_EQ(e->iteration, absl::Seconds(5.8));
  EXPECT_THAT(MicroBatchTimes(job), ElementsAre(absl::Seconds(1.1), absl::Seconds(2.1)));
}

TEST(PipelineCostTest, IdleReplicaCostsNothing) {
  PipelineTiming idle{{absl::Seconds(5)}, {}, 0};
  EXPECT_EQ(PipelineTime(idle), absl::ZeroDuration());
}

TEST(PipelineCostTest, BadInputNamesTheField) {
  EXPECT_THAT(EstimateIteration(JobTiming{}).status().message(), HasSubstr("replicas: empty"));
  JobTiming job;
  job.replicas.push_back(PipelineTiming{{absl::Seconds(1), absl::Seconds(1)}, {}, 1});
  job.stage_allreduce = {absl::ZeroDuration(), absl::ZeroDuration()};
  EXPECT_THAT(EstimateIteration(job).status().message(), HasSubstr("replicas[0].boundary_p2p"));
  job.replicas[0].boundary_p2p = {absl::ZeroDuration()};
  job.replicas.push_back(PipelineTiming{{absl::Seconds(1)}, {}, 1});
  EXPECT_THAT(EstimateIteration(job).status().message(), HasSubstr("replicas[1].stage_compute"));
  job.replicas.pop_back();
  job.replicas[0].stage_compute[1] = -absl::Seconds(1);
  EXPECT_THAT(EstimateIteration(job).status().message(), HasSubstr("replicas[0].stage_compute[1]"));
  job.replicas[0].stage_compute[1] = absl::Seconds(1);
  job.stage_allreduce = {absl::ZeroDuration()};
  EXPECT_THAT(EstimateIteration(job).status().message(), HasSubstr("stage_allreduce: has 1"));
  EXPECT_THAT(UniformJob(0, 1, 1, absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration())
                  .status()
                  .message(),
              HasSubstr("dp: must be >= 1"));
  EXPECT_THAT(UniformJob(1, 1, 1, absl::Seconds(1), -absl::Seconds(1), absl::ZeroDuration())
                  .status()
                  .message(),
              HasSubstr("p2p: must be finite"));
}

}  // namespace
}  // namespace falcon::analysis::plan
