#include "collective/comm_id.h"

#include <set>

#include "gtest/gtest.h"

namespace falcon::collective {
namespace {

TEST(CommIdTest, IdsAreStableDistinctAndNonZero) {
  // Fixed values: ids must agree across processes and builds.
  EXPECT_EQ(WorldCommId(8), WorldCommId(8));
  EXPECT_NE(WorldCommId(8), WorldCommId(4));
  EXPECT_NE(WorldCommId(8, 1), WorldCommId(8, 2));
  std::set<uint64_t> ids;
  const uint64_t world = WorldCommId(8);
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    for (int color = -1; color < 16; ++color) ids.insert(SplitCommId(world, color, seq));
  }
  EXPECT_EQ(ids.size(), 4u * 17u);
  EXPECT_EQ(ids.count(0), 0u);
  EXPECT_EQ(ids.count(world), 0u);
  EXPECT_EQ(MixIds(1, 2), MixIds(1, 2));
  EXPECT_NE(MixIds(1, 2), MixIds(2, 1));
}

TEST(CommIdTest, PlanSplitGroupsByColorOrdersByKeyThenRank) {
  // ranks:        0       1       2       3       4
  const std::vector<std::pair<int, int>> ck = {{0, 5}, {1, 0}, {0, 1}, {-1, 0}, {0, 1}};
  auto g0 = PlanSplit(ck, 0);
  ASSERT_TRUE(g0.ok());
  ASSERT_TRUE(g0->has_value());
  EXPECT_EQ((*g0)->parent_ranks, (std::vector<int>{2, 4, 0}));
  EXPECT_EQ((*g0)->new_rank, 2);
  auto g4 = PlanSplit(ck, 4);
  EXPECT_EQ((*g4)->new_rank, 1);
  auto g1 = PlanSplit(ck, 1);
  EXPECT_EQ((*g1)->parent_ranks, (std::vector<int>{1}));
  auto g3 = PlanSplit(ck, 3);
  ASSERT_TRUE(g3.ok());
  EXPECT_FALSE(g3->has_value());
}

TEST(CommIdTest, PlanSplitRejectsBadInput) {
  EXPECT_EQ(PlanSplit({{0, 0}, {-2, 0}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanSplit({{0, 0}}, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace falcon::collective
