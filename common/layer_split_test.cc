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
  // The later stages get the extra blocks; python/tests/falcon_test.py pins the same table for
  // falcon.layout.even_stage_blocks.
  EXPECT_EQ(EvenStageBlocks(10, 4), (StageBlocks{2, 3, 2, 3}));
  EXPECT_EQ(EvenStageBlocks(5, 2), (StageBlocks{2, 3}));
  EXPECT_EQ(EvenStageBlocks(4, 4), (StageBlocks{1, 1, 1, 1}));
  EXPECT_EQ(EvenStageBlocks(4096, 3), (StageBlocks{1365, 1365, 1366}));
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

// With the model's blocks unknown, every pipeline still holds the same model: replicas[0]'s
// count, at most kMaxPipelineBlocks.
TEST(LayerSplitTest, UnknownBlocksStillNeedOneModelSize) {
  auto message = [](const ::falcon::v1::LayerSplit& s, int dp, int pp) {
    return std::string(ValidateLayerSplit(s, dp, pp, 0, 0).message());
  };
  EXPECT_EQ(message(Split({{2, 6}, {4, 1}}, {3, 5}), 2, 2),
            "layer_split.replicas[1].stage_blocks sum to 5, not the 8 blocks of replicas[0] "
            "(every pipeline holds the whole model)");
  EXPECT_TRUE(ValidateLayerSplit(Split({{2, 6}, {5, 3}}, {3, 5}), 2, 2, 0, 0).ok());
  EXPECT_EQ(message(Split({{4000, 97}}, {1}), 1, 2),
            "layer_split.replicas[0].stage_blocks sum to 4097, more than the 4096 blocks a "
            "pipeline may have");
  EXPECT_TRUE(ValidateLayerSplit(Split({{4000, 96}}, {1}), 1, 2, 0, 0).ok());
}

TEST(LayerSplitTest, NoDpGroupOrNoStageIsEmpty) {
  const auto none = Split(std::vector<StageBlocks>{}, {});
  EXPECT_EQ(ValidateLayerSplit(none, 0, 2, 16, 0).message(),
            "layer_split.replicas: empty (0 DP groups; a job has at least 1)");
  EXPECT_EQ(ValidateLayerSplit(none, -1, 2, 16, 0).code(), absl::StatusCode::kInvalidArgument);
  const auto no_stage = Split(std::vector<StageBlocks>{StageBlocks{}}, {4});
  EXPECT_EQ(ValidateLayerSplit(no_stage, 1, 0, 0, 0).message(),
            "layer_split.replicas[0].stage_blocks: empty (0 stages; a pipeline has at least 1)");
}

TEST(LayerSplitTest, PipelineShapeNamesTheField) {
  EXPECT_TRUE(ValidatePipelineShape(0, 0, 4, "hello.").ok());  // Both unknown.
  EXPECT_TRUE(ValidatePipelineShape(4, kMaxBlockStateBytes, 4, "hello.").ok());
  EXPECT_TRUE(ValidatePipelineShape(1, 0, 0, "hello.").ok());  // PP unknown: 1 block is enough.
  EXPECT_TRUE(ValidatePipelineShape(kMaxPipelineBlocks, 0, 4, "hello.").ok());
  EXPECT_EQ(ValidatePipelineShape(3, 0, 4, "options.").message(),
            "options.pipeline_blocks: 3 is not 0 (unknown) or in [4 (pp_size), 4096]");
  EXPECT_EQ(ValidatePipelineShape(4097, 0, 0, "reg.").message(),
            "reg.pipeline_blocks: 4097 is not 0 (unknown) or in [1 (pp_size), 4096]");
  EXPECT_EQ(ValidatePipelineShape(-1, 0, 0, "reg.").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePipelineShape(0, kMaxBlockStateBytes + 1, 0, "hello.").message(),
            "hello.block_state_bytes: 1125899906842625 is above 2^50 (1125899906842624)");
}

}  // namespace
}  // namespace falcon::common
