#include "analysis/plan/layout.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

using ::testing::HasSubstr;

// 2 (dp) x 2 (pp) x 2 (tp), one TP group per node.
std::vector<RankPlacement> Grid() {
  std::vector<RankPlacement> r;
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      for (int t = 0; t < 2; ++t) {
        const int rank = (d * 2 + p) * 2 + t;
        r.push_back({rank, "node" + std::to_string(d * 2 + p), d, p, t});
      }
    }
  }
  return r;
}

std::string Error(std::vector<RankPlacement> r) {
  absl::StatusOr<Layout> l = Layout::Create(std::move(r));
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(l.status().message());
}

TEST(LayoutTest, IndexesTheGrid) {
  std::vector<RankPlacement> r = Grid();
  std::swap(r[0], r[5]);  // any order
  absl::StatusOr<Layout> l = Layout::Create(r);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->world_size(), 8);
  EXPECT_EQ(l->dp_size(), 2);
  EXPECT_EQ(l->pp_size(), 2);
  EXPECT_EQ(l->tp_size(), 2);
  EXPECT_EQ(l->RankAt(1, 0, 1), 5);
  EXPECT_EQ(l->at(5).node, "node2");
  EXPECT_EQ(l->NodeAt(1, 1), "node3");
  EXPECT_EQ(l->ranks()[3].rank, 3);
}

TEST(LayoutTest, RejectsMalformedLayouts) {
  EXPECT_THAT(Error({}), HasSubstr("empty layout"));
  std::vector<RankPlacement> r = Grid();
  r[2].rank = 8;
  EXPECT_THAT(Error(r), HasSubstr("ranks[2] (rank 8).rank: must be in [0, 8)"));
  r = Grid();
  r[2].rank = 1;
  EXPECT_THAT(Error(r), HasSubstr("ranks[2] (rank 1).rank: repeats ranks[1]"));
  r = Grid();
  r[4].node = "";
  EXPECT_THAT(Error(r), HasSubstr("ranks[4] (rank 4).node: empty while ranks[0] has one"));
  r = Grid();
  for (RankPlacement& p : r) p.node = "";
  r[3].node = "node1";
  EXPECT_THAT(Error(r), HasSubstr("ranks[3] (rank 3).node: set while ranks[0] has none"));
  r = Grid();
  r[4].pp = -1;
  EXPECT_THAT(Error(r), HasSubstr("ranks[4] (rank 4).pp: must be in [0, 8), got -1"));
  r = Grid();
  r[7].tp = 0;
  EXPECT_THAT(Error(r), HasSubstr("cell (dp 1, pp 1, tp 0) is also held by rank 6"));
  r = Grid();
  r[7].tp = 2;
  EXPECT_THAT(Error(r), HasSubstr("do not fill the 2 (dp) x 2 (pp) x 3 (tp) grid"));
  r = Grid();
  r[7].node = "node0";
  EXPECT_THAT(Error(r), HasSubstr("TP groups must stay inside a node"));
}

TEST(LayoutTest, WithoutNodes) {
  std::vector<RankPlacement> r = Grid();
  for (RankPlacement& p : r) p.node = "";
  absl::StatusOr<Layout> l = Layout::Create(r);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->NodeAt(1, 0), "");
}

TEST(LayoutTest, DefaultPlacesStagesOutermost) {
  absl::StatusOr<Layout> l = Layout::Default(8, 4, 2);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->tp_size(), 1);
  EXPECT_EQ(l->at(0), (RankPlacement{0, "", 0, 0, 0}));
  EXPECT_EQ(l->at(3), (RankPlacement{3, "", 3, 0, 0}));
  EXPECT_EQ(l->at(5), (RankPlacement{5, "", 1, 1, 0}));
  EXPECT_EQ(l->RankAt(2, 1, 0), 6);
  EXPECT_EQ(l->PipelineRanks(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(l->StageRanks(1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(Layout::Default(2, 1, 2)->ToString(), "DP=1 x PP=2 x TP=1 [r0:(0,0,0) r1:(0,1,0)]");
  EXPECT_EQ(Layout::Create(Grid())->ToString().substr(0, 40),
            "DP=2 x PP=2 x TP=2 [r0:(0,0,0)@node0 r1:");
}

TEST(LayoutTest, DefaultWithAWrongWorldSizeIsAClearError) {
  for (auto [world, dp, pp] : {std::tuple{8, 3, 2}, {8, 0, 8}, {8, 8, 0}, {4, 2, 4}}) {
    absl::Status s = Layout::Default(world, dp, pp).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("DP=", dp, " x PP=", pp)));
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("world has ", world)));
  }
}

}  // namespace
}  // namespace falcon::analysis::plan
