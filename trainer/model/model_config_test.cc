#include "trainer/model/model_config.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::model {
namespace {

ModelConfig Blocks(int n) {
  ModelConfig c;
  c.vocab_size = 10;
  c.num_blocks = n;
  return c;
}

TEST(ModelConfigTest, EvenStagesSplitTheBlocksEvenly) {
  const ModelConfig c = Blocks(5);  // Layers 0 (embedding), 1..5 (blocks), 6 (head).
  EXPECT_EQ(LayersOfStage(c, 1, 0).first, 0);
  EXPECT_EQ(LayersOfStage(c, 1, 0).end, 7);
  // Stage s gets blocks [s*5/2, (s+1)*5/2): 2 and 3.
  EXPECT_EQ(LayersOfStage(c, 2, 0).first, 0);
  EXPECT_EQ(LayersOfStage(c, 2, 0).end, 3);
  EXPECT_EQ(LayersOfStage(c, 2, 1).first, 3);
  EXPECT_EQ(LayersOfStage(c, 2, 1).end, 7);
  for (int pp = 1; pp <= 5; ++pp) {
    for (int s = 0; s < pp; ++s) {
      const StageLayers even = LayersOfStage(c, pp, s);
      EXPECT_EQ(even.first, s == 0 ? 0 : 1 + s * 5 / pp) << pp << " " << s;
      EXPECT_EQ(even.end, s == pp - 1 ? 7 : 1 + (s + 1) * 5 / pp) << pp << " " << s;
    }
  }
  EXPECT_EQ(StageOfLayer(c, 2, 0), 0);
  EXPECT_EQ(StageOfLayer(c, 2, 3), 1);
  EXPECT_EQ(StageOfLayer(c, 2, 6), 1);
}

TEST(ModelConfigTest, UnevenSplitsKeepEmbeddingAndHeadAtTheEnds) {
  const ModelConfig c = Blocks(16);
  const std::vector<int> split = {6, 10};
  EXPECT_EQ(LayersOfStage(c, split, 0).first, 0);  // Embedding + blocks 0..5 (layers 1..6).
  EXPECT_EQ(LayersOfStage(c, split, 0).end, 7);
  EXPECT_EQ(LayersOfStage(c, split, 1).first, 7);  // Blocks 6..15 + head.
  EXPECT_EQ(LayersOfStage(c, split, 1).end, 18);
  const std::vector<int> three = {1, 14, 1};
  EXPECT_EQ(LayersOfStage(c, three, 0).end, 2);
  EXPECT_EQ(LayersOfStage(c, three, 1).first, 2);
  EXPECT_EQ(LayersOfStage(c, three, 1).end, 16);
  EXPECT_EQ(LayersOfStage(c, three, 2).first, 16);
  EXPECT_EQ(LayersOfStage(c, three, 2).end, 18);
}

TEST(ModelConfigTest, BlockStateBytesIsParamsAndBothMomentsInFloat32) {
  ModelConfig c = Blocks(4);
  c.hidden = 32;
  c.ffn = 64;
  EXPECT_EQ(BlockStateBytes(c), 3 * 4 * (2 * 32 * 64 + 64 + 32));
  EXPECT_EQ(BlockStateBytes(c), 3 * 4 * LayerParamCount(c, 2));
}

}  // namespace
}  // namespace falcon::trainer::model
