#include "controller/registry/role_inference.h"

#include "gtest/gtest.h"

namespace falcon::controller::registry {
namespace {

using falcon::v1::CommKind;

CommForInference Comm(uint64_t id, std::vector<uint32_t> members, std::vector<std::string> nodes,
                      CommKind hint = falcon::v1::COMM_KIND_UNKNOWN) {
  CommForInference c;
  c.comm_id = id;
  c.members = std::move(members);
  c.member_nodes = std::move(nodes);
  c.hint = hint;
  return c;
}

TEST(RoleInferenceTest, HintsWinAndWorldIsEveryRank) {
  auto r = InferRoles(4,
                      {Comm(1, {0, 1, 2, 3}, {"a", "a", "b", "b"}),
                       Comm(2, {0, 2}, {"a", "b"}, falcon::v1::COMM_KIND_PP)},
                      {});
  EXPECT_EQ(r.kinds[0], falcon::v1::COMM_KIND_WORLD);
  EXPECT_EQ(r.kinds[1], falcon::v1::COMM_KIND_PP);
}

TEST(RoleInferenceTest, TwoNodeTpDpLayoutWithoutHints) {
  // 2 nodes x 2 GPUs: TP pairs inside nodes, DP pairs across nodes (8 ranks: TP=2, DP=2, PP=2).
  std::vector<CommForInference> comms = {
      Comm(10, {0, 1}, {"a", "a"}),  // TP inside node a.
      Comm(11, {2, 3}, {"b", "b"}),  // TP inside node b.
      Comm(20, {0, 2}, {"a", "b"}),  // Crosses nodes, collective traffic -> DP.
      Comm(30, {1, 3}, {"a", "b"}),  // Crosses nodes, point-to-point -> PP.
  };
  comms[0].traffic.collective_ops = 10;
  comms[1].traffic.collective_ops = 10;
  comms[2].traffic.collective_ops = 5;
  comms[3].traffic.p2p_ops = 8;
  auto r = InferRoles(8, comms, {});
  EXPECT_EQ(r.kinds[0], falcon::v1::COMM_KIND_TP);
  EXPECT_EQ(r.kinds[1], falcon::v1::COMM_KIND_TP);
  EXPECT_EQ(r.kinds[2], falcon::v1::COMM_KIND_DP);
  EXPECT_EQ(r.kinds[3], falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(r.layout.tp, 2u);
  EXPECT_EQ(r.layout.dp, 2u);
  EXPECT_EQ(r.layout.pp, 2u);
}

TEST(RoleInferenceTest, HintedSizesDecideAndUntraffickedPairStaysUnknown) {
  LayoutSizes hinted;
  hinted.dp = 4;
  hinted.pp = 2;
  auto r = InferRoles(8,
                      {Comm(1, {0, 1, 2, 3}, {"a", "a", "b", "b"}), Comm(2, {0, 4}, {"a", "c"}),
                       Comm(3, {5, 6}, {"", ""})},
                      hinted);
  EXPECT_EQ(r.kinds[0], falcon::v1::COMM_KIND_DP);
  EXPECT_EQ(r.kinds[1], falcon::v1::COMM_KIND_PP);  // Size equals the hinted PP size.
  EXPECT_EQ(r.kinds[2], falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(r.layout.tp, 1u);
  auto none = InferRoles(8, {Comm(3, {5, 6}, {"", ""})}, {});
  EXPECT_EQ(none.kinds[0], falcon::v1::COMM_KIND_UNKNOWN);
}

}  // namespace
}  // namespace falcon::controller::registry
