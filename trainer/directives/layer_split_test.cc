#include "trainer/directives/layer_split.h"

#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

TEST(LayerSplitTest, EvenSplitsAndSameness) {
  const std::vector<common::StageBlocks> even = EvenSplits(3, 2, 9);
  ASSERT_EQ(even.size(), 3u);
  for (const common::StageBlocks& s : even) EXPECT_EQ(s, (common::StageBlocks{4, 5}));
  EXPECT_TRUE(SameSplitEverywhere(even));
  EXPECT_TRUE(SameSplitEverywhere({}));
  EXPECT_FALSE(SameSplitEverywhere({{4, 5}, {3, 6}, {4, 5}}));
}

TEST(LayerSplitTest, EmulatedTimeScalesWithTheBlocksAStageHolds) {
  const absl::Duration d = absl::Milliseconds(5);
  // An even split of blocks divisible by PP: exactly the per-forward time times the units.
  EXPECT_EQ(EmulatedStageTime(d, 1, 8, 16, 2), d);
  EXPECT_EQ(EmulatedStageTime(d, 2, 4, 16, 4), 2 * d);
  EXPECT_EQ(EmulatedStageTime(d, 2 * 1.5, 8, 16, 2), d * 3.0);  // A fault's factor stretches it.
  // Half the blocks: half the time; the stage that took them: 1.5 times.
  EXPECT_EQ(EmulatedStageTime(d, 1, 4, 16, 2), d / 2);
  EXPECT_EQ(EmulatedStageTime(d, 2, 4, 16, 2), d);
  EXPECT_EQ(EmulatedStageTime(d, 1, 12, 16, 2), d * 1.5);
  // Blocks not divisible by PP: each stage by its share of the average (3 of 2.5 blocks).
  EXPECT_EQ(EmulatedStageTime(d, 1, 3, 5, 2), d * 1.2);
  EXPECT_EQ(EmulatedStageTime(absl::ZeroDuration(), 2, 3, 5, 2), absl::ZeroDuration());
}

}  // namespace
}  // namespace falcon::trainer::directives
