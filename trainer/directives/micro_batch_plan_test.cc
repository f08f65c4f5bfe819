#include "trainer/directives/micro_batch_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;

TEST(MicroBatchPlanTest, WrongWorldSizeIsAClearError) {
  absl::Status s = ValidateParallelConfig(8, 3, 2, 8, 4);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not divide the world size 8"));
  s = ValidateParallelConfig(8, 2, 2, 8, 4);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not match the world size 8"));
}

TEST(MicroBatchPlanTest, MicroBatchesMustBeAMultipleOfPp) {
  absl::Status s = ValidateParallelConfig(4, 2, 2, 7, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--micro-batches 7"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--pp 2"));
  EXPECT_FALSE(ValidateParallelConfig(4, 2, 2, 0, 4).ok());
  EXPECT_THAT(std::string(ValidateParallelConfig(4, 1, 4, 8, 2).message()),
              HasSubstr("--layers 2"));
  EXPECT_TRUE(ValidateParallelConfig(8, 4, 2, 8, 4).ok());
}

TEST(MicroBatchPlanTest, EvenPlanUsesChunksOfPp) {
  EXPECT_EQ(EvenMicroBatchPlan(4, 2, 8), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(EvenMicroBatchPlan(3, 2, 8), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(EvenMicroBatchPlan(1, 1, 5), (std::vector<int>{5}));
  EXPECT_EQ(MicroBatchOffset({4, 2, 2}, 2), 6);
  EXPECT_TRUE(ValidateMicroBatchPlan({4, 2, 2}, 3, 2, 8).ok());
}

TEST(MicroBatchPlanTest, BadMicroBatchPlansNameTheEntry) {
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 3, 1}, 3, 2, 8).message()),
              HasSubstr("micro_batches[1] = 3"));
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 4}, 3, 2, 8).message()),
              HasSubstr("3 DP groups"));
  EXPECT_THAT(std::string(ValidateMicroBatchPlan({4, 2, 4}, 3, 2, 8).message()),
              HasSubstr("sums to 10"));
}

}  // namespace
}  // namespace falcon::trainer::directives
