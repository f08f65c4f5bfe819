#include "common/layer_split.h"

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

::falcon::v1::LayerSplit Split(const std::vector<StageBlocks>& replicas,
                               const std::vector<uint32_t>& micro_batches) {
  ::falcon::v1::LayerSplit s;
  SetStageBlocks(replicas, &s);
  for (uint32_t m : micro_batches) s.add_micro_batches(m);
  return s;
}

TEST(LayerSplitTest, EvenSplitSpreadsTheRemainder) {
  EXPECT_EQ(EvenStageBlocks(16, 2), (StageBlocks{8, 8}));
  EXPECT_EQ(EvenStageBlocks(7, 3), (StageBlocks{2, 2, 3}));
  EXPECT_EQ(EvenStageBlocks(2, 3), StageBlocks{});
  EXPECT_TRUE(IsEvenSplit({{8, 8}, {8, 8}}, 16));
  EXPECT_FALSE(IsEvenSplit({{8, 8}, {6, 10}}, 16));
  EXPECT_EQ(SplitText({{8, 8}, {6, 10}}, 16), "dp1 6+10");
  EXPECT_EQ(SplitText({{8, 8}}, 16), "even");
}

TEST(LayerSplitTest, AcceptsAValidSplitAndRoundTrips) {
  const auto s = Split({{8, 8}, {6, 10}}, {17, 15});
  EXPECT_TRUE(ValidateLayerSplit(s, 2, 2, 16, 32).ok());
  EXPECT_TRUE(ValidateLayerSplit(s, 2, 2, 0, 0).ok());  // Sums unknown.
  EXPECT_EQ(StageBlocksOf(s), (std::vector<StageBlocks>{{8, 8}, {6, 10}}));
}

TEST(LayerSplitTest, NamesTheBadField) {
  auto expect = [](const ::falcon::v1::LayerSplit& s, const std::string& field) {
    const absl::Status st = ValidateLayerSplit(s, 2, 2, 16, 32);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(st.message().find(field), absl::string_view::npos) << st;
  };
  expect(Split({{8, 8}}, {16, 16}), "layer_split.replicas:");
  expect(Split({{8, 8}, {8, 8}}, {32}), "layer_split.micro_batches:");
  expect(Split({{8, 8}, {16}}, {16, 16}), "layer_split.replicas[1].stage_blocks:");
  expect(Split({{8, 8}, {0, 16}}, {16, 16}), "layer_split.replicas[1].stage_blocks[0]");
  expect(Split({{8, 8}, {7, 8}}, {16, 16}), "layer_split.replicas[1].stage_blocks sum");
  expect(Split({{8, 8}, {8, 8}}, {32, 0}), "layer_split.micro_batches[1]");
  expect(Split({{8, 8}, {8, 8}}, {16, 15}), "layer_split.micro_batches sum");
  EXPECT_FALSE(ValidateLayerSplit(Split({{8, 8}}, {1}), 1, 2, 99999, 0).ok());
}

}  // namespace
}  // namespace falcon::common
