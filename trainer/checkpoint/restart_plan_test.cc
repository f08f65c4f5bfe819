#include "trainer/checkpoint/restart_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::checkpoint {
namespace {

TEST(RestartPlanTest, DropsExcludedRanksAndShrinksDp) {
  absl::StatusOr<collective::fault::FaultPlan> faults = collective::fault::ParseFaultSpec(
      "compute:rank=5,factor=2; compute:rank=6,factor=3; link:src=6,dst=2,delay_ms=5;"
      " link:src=1,dst=5,delay_ms=5");
  ASSERT_TRUE(faults.ok()) << faults.status();
  absl::StatusOr<RestartPlan> p = PlanRestart(8, 2, 8, {5}, *faults, 2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->dp, 3);
  EXPECT_EQ(p->pp, 2);
  EXPECT_EQ(p->world, 6);
  EXPECT_EQ(p->nodes, 2);
  EXPECT_EQ(p->old_rank, (std::vector<int>{0, 1, 2, 3, 4, 6}));
  // Rank 5's fault and the link into it are gone; rank 6 is now rank 5.
  ASSERT_EQ(p->faults.compute.size(), 1u);
  EXPECT_EQ(p->faults.compute[0].rank, 5);
  EXPECT_EQ(p->faults.compute[0].factor, 3);
  ASSERT_EQ(p->faults.links.size(), 1u);
  EXPECT_EQ(p->faults.links[0].src, 5);
  EXPECT_EQ(p->faults.links[0].dst, 2);
}

TEST(RestartPlanTest, GlobalBatchLimitsDpAndNodesDivideTheWorld) {
  absl::StatusOr<RestartPlan> p = PlanRestart(8, 1, 4, {0}, {}, 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dp, 4);  // 7 survivors, but only 4 micro-batches to share.
  EXPECT_EQ(p->old_rank, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(p->nodes, 4);
  p = PlanRestart(4, 1, 4, {1}, {}, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->world, 3);
  EXPECT_EQ(p->nodes, 1);
}

TEST(RestartPlanTest, Errors) {
  EXPECT_EQ(PlanRestart(4, 2, 4, {4}, {}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanRestart(4, 4, 4, {0}, {}, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace falcon::trainer::checkpoint
