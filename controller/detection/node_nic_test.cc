#include "controller/detection/node_nic.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace falcon::controller::detection {
namespace {

constexpr double kFast = 1.0;   // Bytes per ns of a healthy cross-node link.
constexpr double kSlow = 0.25;  // Through a NIC capped at a quarter.
constexpr double kLocal = 4.0;  // Inside a node (loopback): faster by nature.

// `ranks` ranks, two per node: rank r on "node-<r / 2>" (the demo's DP=4 x PP=2 on 4 nodes).
RankNodes TwoPerNode(uint32_t ranks) {
  RankNodes n;
  for (uint32_t r = 0; r < ranks; ++r) n[r] = absl::StrCat("node-", r / 2);
  return n;
}

falcon::v1::Link L(uint32_t src, uint32_t dst) {
  falcon::v1::Link l;
  l.set_src_rank(src);
  l.set_dst_rank(dst);
  return l;
}

// Both directions of each pair; a link is slow when an end is on one of `slow_nodes`, local when
// both ends share a node.
std::vector<LinkFigure> Measure(const std::vector<std::pair<uint32_t, uint32_t>>& pairs,
                                const RankNodes& nodes, const std::set<std::string>& slow_nodes) {
  std::vector<LinkFigure> out;
  for (const auto& [a, b] : pairs) {
    for (const auto& [s, d] : {std::pair{a, b}, std::pair{b, a}}) {
      const std::string& ns = nodes.at(s);
      const std::string& nd = nodes.at(d);
      double bw = kFast;
      if (ns == nd) {
        bw = kLocal;
      } else if (slow_nodes.count(ns) > 0 || slow_nodes.count(nd) > 0) {
        bw = kSlow;
      }
      out.push_back({s, d, bw});
    }
  }
  return out;
}

// What validation measures in the demo when profiling suspects stage 1's DP communicator
// {4, 5, 6, 7} and the pipeline pairs 0-4 and 1-5: the DP communicator's ring and heap tree, and
// the pairs with their reference pairs 2-6 and 3-7 (docs/algorithms.md#reference-links).
std::vector<std::pair<uint32_t, uint32_t>> DemoPairs() {
  return {{4, 5}, {5, 6}, {6, 7}, {7, 4}, {6, 4}, {7, 5},  // DP ring + tree (4-5 is both).
          {0, 4}, {1, 5}, {2, 6}, {3, 7}};
}

TEST(NodeNicTest, EveryCrossNodeLinkOfANodeSlowNamesItsNic) {
  const RankNodes nodes = TwoPerNode(8);
  const NodeNicResult r = FindNodeNicFaults(Measure(DemoPairs(), nodes, {"node-2"}), nodes, {}, {});
  ASSERT_EQ(r.faults.size(), 1u) << r.note;
  const NodeNicFault& f = r.faults[0];
  EXPECT_EQ(f.node, "node-2");
  // 4 and 5 with 6 and 7 (ring and tree, both ways) and with 0 and 1 (the pipeline pairs).
  EXPECT_EQ(f.links.size(), 12u);
  EXPECT_EQ(f.peers, (std::vector<std::string>{"node-0", "node-3"}));
  EXPECT_NEAR(f.ratios.front(), 4.0, 1e-9);
  // Node 0 reaches node 2 only, in both directions: its links are slow, but node 2 explains them.
  EXPECT_EQ(r.cross_node_links, 16);
  EXPECT_EQ(r.node_pairs, 3);
  EXPECT_EQ(r.slow_links.size(), 12u);
  EXPECT_EQ(DescribeNodeNicFaults(r),
            "NIC of node node-2: all 12 measured links to other nodes are slow (x4.00 the "
            "reference node pair at worst), to node-0, node-3");
}

TEST(NodeNicTest, LinksInsideANodeAreNoEvidence) {
  const RankNodes nodes = TwoPerNode(8);
  std::vector<LinkFigure> links = Measure(DemoPairs(), nodes, {"node-2"});
  // Even a loopback link as slow as the NIC's does not cross it: the node is judged without it.
  for (LinkFigure& l : links) {
    if (l.src / 2 == l.dst / 2) l.bandwidth = kSlow;
  }
  const NodeNicResult r = FindNodeNicFaults(links, nodes, {}, {});
  ASSERT_EQ(r.faults.size(), 1u) << r.note;
  EXPECT_EQ(r.faults[0].node, "node-2");
  EXPECT_EQ(r.cross_node_links, 16);
  // But a link inside a node that the communicators found slow is a fault of its own: no NIC.
  const NodeNicResult blocked = FindNodeNicFaults(links, nodes, {L(4, 5)}, {});
  EXPECT_TRUE(blocked.faults.empty());
  EXPECT_NE(blocked.note.find("4->5"), std::string::npos) << blocked.note;
}

TEST(NodeNicTest, OneSlowLinkIsNoNode) {
  const RankNodes nodes = TwoPerNode(8);
  std::vector<LinkFigure> links = Measure(DemoPairs(), nodes, {});
  for (LinkFigure& l : links) {
    if (l.src == 5 && l.dst == 6) l.bandwidth = kSlow;
  }
  const NodeNicResult r = FindNodeNicFaults(links, nodes, {L(5, 6)}, {});
  EXPECT_TRUE(r.faults.empty());
  ASSERT_EQ(r.slow_links.size(), 1u);
  EXPECT_EQ(r.slow_links[0].src_rank(), 5u);
  EXPECT_TRUE(r.note.empty()) << r.note;
}

TEST(NodeNicTest, SlowLinksOnTwoNodesThatCoverNeitherAreLinks) {
  const RankNodes nodes = TwoPerNode(8);
  // Every link of rank 4 (node 2) and of rank 3 (node 1) across nodes is slow, but rank 5 (node
  // 2) and rank 2 (node 1) are fine with others: neither node's links are all slow.
  std::vector<std::pair<uint32_t, uint32_t>> pairs = DemoPairs();
  pairs.push_back({0, 2});
  pairs.push_back({1, 3});
  std::vector<LinkFigure> links = Measure(pairs, nodes, {});
  for (LinkFigure& l : links) {
    const bool four = (l.src == 4 || l.dst == 4) && l.src / 2 != l.dst / 2;
    const bool three = (l.src == 3 || l.dst == 3) && l.src / 2 != l.dst / 2;
    if (four || three) l.bandwidth = kSlow;
  }
  const NodeNicResult r = FindNodeNicFaults(links, nodes, {}, {});
  EXPECT_TRUE(r.faults.empty());
  EXPECT_FALSE(r.slow_links.empty());
}

TEST(NodeNicTest, SlowLinksToOnePeerOnlyCannotTellWhichNic) {
  // Node 0 and node 2 (pipeline pairs 0-4, 1-5) slow both ways, the reference pairs on nodes 1
  // and 3 fine: node 0's NIC, node 2's, or the path between them.
  const RankNodes nodes = TwoPerNode(8);
  const NodeNicResult r = FindNodeNicFaults(
      Measure({{0, 4}, {1, 5}, {2, 6}, {3, 7}}, nodes, {"node-0"}), nodes, {}, {});
  EXPECT_TRUE(r.faults.empty());
  EXPECT_NE(r.note.find("they all reach node node-2"), std::string::npos) << r.note;
}

TEST(NodeNicTest, PeersNeverSeenFineAreNoEvidence) {
  // Five nodes; node 2's links reach nodes 0 and 3, which were measured with nobody else, and the
  // healthy reference is nodes 1 and 4's pair: nothing says nodes 0 and 3 are fine.
  const RankNodes nodes = TwoPerNode(10);
  const NodeNicResult r = FindNodeNicFaults(
      Measure({{4, 5}, {5, 6}, {7, 4}, {0, 4}, {1, 5}, {2, 8}, {3, 9}}, nodes, {"node-2"}), nodes,
      {}, {});
  EXPECT_TRUE(r.faults.empty());
  EXPECT_EQ(r.slow_links.size(), 8u);
  EXPECT_NE(r.note.find("node node-2 to other nodes is slow, but none of the nodes they reach "
                        "(node-0, node-3) was measured fine"),
            std::string::npos)
      << r.note;
}

TEST(NodeNicTest, ASlowLinkAmongOtherNodesLeavesLinks) {
  const RankNodes nodes = TwoPerNode(8);
  std::vector<LinkFigure> links = Measure(DemoPairs(), nodes, {"node-2"});
  // The reference pair 3 <-> 7 (nodes 1 and 3) is slow one way too.
  for (LinkFigure& l : links) {
    if (l.src == 3 && l.dst == 7) l.bandwidth = kSlow;
  }
  const NodeNicResult r = FindNodeNicFaults(links, nodes, {}, {});
  EXPECT_TRUE(r.faults.empty());
  EXPECT_NE(r.note.find("3->7"), std::string::npos) << r.note;
  // Likewise when only a communicator's judgment found it.
  const NodeNicResult by_comm =
      FindNodeNicFaults(Measure(DemoPairs(), nodes, {"node-2"}), nodes, {L(2, 6)}, {});
  EXPECT_TRUE(by_comm.faults.empty());
}

TEST(NodeNicTest, TwoSlowNodesAreNamedWhenEachSatisfiesTheRule) {
  // Six nodes, every cross-node pair of ranks measured both ways; nodes 0 and 2 slow: 9 of the 15
  // node pairs, under the 3/4 the upper quartile stands.
  const RankNodes nodes = TwoPerNode(12);
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (uint32_t a = 0; a < 12; ++a) {
    for (uint32_t b = a + 1; b < 12; ++b) pairs.push_back({a, b});
  }
  const NodeNicResult r =
      FindNodeNicFaults(Measure(pairs, nodes, {"node-0", "node-2"}), nodes, {}, {});
  ASSERT_EQ(r.faults.size(), 2u) << r.note;
  EXPECT_EQ(r.faults[0].node, "node-0");
  EXPECT_EQ(r.faults[1].node, "node-2");
  EXPECT_EQ(r.faults[0].links.size(), 40u);  // 2 ranks x 10 ranks elsewhere x 2 directions.
}

TEST(NodeNicTest, ARankOfUnknownNodeOnASlowLinkNamesNoNode) {
  RankNodes nodes = TwoPerNode(8);
  const std::vector<LinkFigure> links = Measure(DemoPairs(), nodes, {"node-2"});
  nodes.erase(0);  // Rank 0's node unknown: its links are not judged...
  const NodeNicResult r = FindNodeNicFaults(links, nodes, {}, {});
  ASSERT_EQ(r.faults.size(), 1u);
  EXPECT_EQ(r.faults[0].links.size(), 10u);
  // ...and when the communicators found one of them slow, nothing explains it.
  EXPECT_TRUE(FindNodeNicFaults(links, nodes, {L(0, 4)}, {}).faults.empty());
}

TEST(NodeNicTest, NothingMeasuredAcrossNodesNamesNothing) {
  const RankNodes nodes = TwoPerNode(8);
  EXPECT_TRUE(FindNodeNicFaults({}, nodes, {}, {}).faults.empty());
  EXPECT_TRUE(FindNodeNicFaults(Measure({{0, 1}, {4, 5}}, nodes, {"node-2"}), nodes, {}, {})
                  .faults.empty());
  NodeNicOptions bad;
  bad.slow_ratio = 0;
  EXPECT_TRUE(
      FindNodeNicFaults(Measure(DemoPairs(), nodes, {"node-2"}), nodes, {}, bad).faults.empty());
}

}  // namespace
}  // namespace falcon::controller::detection
