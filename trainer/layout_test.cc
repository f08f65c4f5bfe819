#include "trainer/layout.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::trainer {
namespace {

using ::testing::HasSubstr;

TEST(LayoutTest, DefaultPlacesStagesOutermost) {
  absl::StatusOr<Layout> l = Layout::Default(8, 4, 2);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->PositionOf(0), (RankPosition{0, 0}));
  EXPECT_EQ(l->PositionOf(3), (RankPosition{3, 0}));
  EXPECT_EQ(l->PositionOf(5), (RankPosition{1, 1}));
  EXPECT_EQ(l->RankAt(2, 1), 6);
  EXPECT_EQ(l->PipelineRanks(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(l->StageRanks(1), (std::vector<int>{4, 5, 6, 7}));
}

TEST(LayoutTest, WrongWorldSizeIsAClearError) {
  absl::Status s = Layout::Default(8, 3, 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("DP=3 x PP=2"));
  s = ValidateParallelConfig(8, 3, 2, 8, 4);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not divide the world size 8"));
  s = ValidateParallelConfig(8, 2, 2, 8, 4);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not match the world size 8"));
}

TEST(LayoutTest, MicroBatchesMustBeAMultipleOfPp) {
  absl::Status s = ValidateParallelConfig(4, 2, 2, 7, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--microbatches 7"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--pp 2"));
  EXPECT_FALSE(ValidateParallelConfig(4, 2, 2, 0, 4).ok());
  EXPECT_THAT(std::string(ValidateParallelConfig(4, 1, 4, 8, 2).message()),
              HasSubstr("--layers 2"));
  EXPECT_TRUE(ValidateParallelConfig(8, 4, 2, 8, 4).ok());
}

TEST(LayoutTest, EvenPlanUsesChunksOfPp) {
  EXPECT_EQ(EvenMicroBatchPlan(4, 2, 8), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(EvenMicroBatchPlan(3, 2, 8), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(EvenMicroBatchPlan(1, 1, 5), (std::vector<int>{5}));
  EXPECT_EQ(MicroBatchOffset({4, 2, 2}, 2), 6);
  EXPECT_TRUE(ValidateMicroBatchPlan({4, 2, 2}, 3, 2, 8).ok());
}

TEST(LayoutTest, BadMicroBatchPlansNameTheEntry) {
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 3, 1}, 3, 2, 8).message()),
              HasSubstr("micro_batches[1] = 3"));
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 4}, 3, 2, 8).message()),
              HasSubstr("3 DP groups"));
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 2, 4}, 3, 2, 8).message()),
              HasSubstr("sums to 10"));
}

falcon::v1::TopologyChange Change(const std::vector<std::vector<int>>& rows) {
  falcon::v1::TopologyChange c;
  for (const auto& r : rows) {
    falcon::v1::RankAssignment* a = c.add_assignments();
    a->set_rank(r[0]);
    a->set_dp_index(r[1]);
    a->set_pp_index(r[2]);
    if (r.size() > 3) a->set_tp_index(r[3]);
  }
  return c;
}

TEST(LayoutTest, TopologyChangeSwapsPositions) {
  // The paper's node swap: ranks 1 and 2 exchange their (dp, pp) positions.
  absl::StatusOr<Layout> l =
      Layout::FromTopologyChange(Change({{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 1}}), 4);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->dp(), 2);
  EXPECT_EQ(l->pp(), 2);
  EXPECT_EQ(l->PositionOf(1), (RankPosition{0, 1}));
  EXPECT_EQ(l->RankAt(1, 0), 2);
}

TEST(LayoutTest, MalformedTopologyChangesAreRejected) {
  EXPECT_THAT(std::string(Layout::FromTopologyChange(Change({{0, 0, 0}}), 2).status().message()),
              HasSubstr("1 entries"));
  EXPECT_THAT(
      std::string(Layout::FromTopologyChange(Change({{0, 0, 0}, {0, 1, 0}}), 2).status().message()),
      HasSubstr("assigned twice"));
  EXPECT_THAT(
      std::string(Layout::FromTopologyChange(Change({{0, 0, 0}, {1, 0, 0}}), 2).status().message()),
      HasSubstr("share position"));
  EXPECT_THAT(
      std::string(
          Layout::FromTopologyChange(Change({{0, 0, 0}, {1, 1, 0, 1}}), 2).status().message()),
      HasSubstr("tp_index"));
  // (0,0), (1,1), (2,2): not a full grid.
  EXPECT_FALSE(Layout::FromTopologyChange(Change({{0, 0, 0}, {1, 1, 1}, {2, 2, 2}}), 3).ok());
}

}  // namespace
}  // namespace falcon::trainer
