#include "analysis/detect/validation_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every rank sends at most once and receives at most once in each pass.
void ExpectNonOverlapping(const PassPlan& plan) {
  for (const auto& pass : plan.passes) {
    std::set<int64_t> senders, receivers;
    for (const LinkPair& l : pass) {
      EXPECT_TRUE(senders.insert(l.src).second) << "rank " << l.src << " sends twice";
      EXPECT_TRUE(receivers.insert(l.dst).second) << "rank " << l.dst << " receives twice";
    }
    for (int64_t s : senders) EXPECT_EQ(receivers.count(s), 0u) << "rank " << s << " does both";
  }
}

std::multiset<std::pair<int64_t, int64_t>> Links(const PassPlan& plan) {
  std::multiset<std::pair<int64_t, int64_t>> out;
  for (const auto& pass : plan.passes) {
    for (const LinkPair& l : pass) out.insert({l.src, l.dst});
  }
  return out;
}

TEST(PlanRingPassesTest, CoversEveryLinkOnceInTwoOrThreePasses) {
  for (int n = 2; n <= 64; ++n) {
    std::vector<int64_t> ring(n);
    std::iota(ring.begin(), ring.end(), 100);
    std::reverse(ring.begin(), ring.end());  // Any order.
    const PassPlan plan = *PlanRingPasses(ring);
    EXPECT_EQ(plan.passes.size(), n % 2 == 0 ? 2u : 3u) << "n=" << n;
    std::multiset<std::pair<int64_t, int64_t>> want;
    for (int i = 0; i < n; ++i) want.insert({ring[i], ring[(i + 1) % n]});
    EXPECT_EQ(Links(plan), want) << "n=" << n;
    if (n > 2) ExpectNonOverlapping(plan);
  }
  EXPECT_THAT(PlanRingPasses({5})->passes, IsEmpty());
}

TEST(PlanRingPassesTest, RejectsBadRings) {
  EXPECT_THAT(PlanRingPasses({}).status().message(), HasSubstr("no ranks"));
  EXPECT_THAT(PlanRingPasses({1, 2, 1}).status().message(), HasSubstr("rank 1 appears twice"));
  EXPECT_THAT(PlanRingPasses({1, -2}).status().message(), HasSubstr("-2"));
}

TEST(PlanTreePassesTest, HeapTreesCoverEveryEdgeOnceInAtMostFourPasses) {
  for (int n = 2; n <= 100; ++n) {
    std::vector<int64_t> ranks(n);
    std::iota(ranks.begin(), ranks.end(), 0);
    const std::vector<TreeEdge> edges = HeapTree(ranks);
    ASSERT_EQ(edges.size(), static_cast<size_t>(n - 1));
    const PassPlan plan = *PlanTreePasses(edges);
    EXPECT_LE(plan.passes.size(), 4u);
    if (n >= 8) {
      EXPECT_EQ(plan.passes.size(), 4u) << "n=" << n;
    }
    std::multiset<std::pair<int64_t, int64_t>> want;
    for (const TreeEdge& e : edges) want.insert({e.child, e.parent});
    EXPECT_EQ(Links(plan), want) << "n=" << n;
    ExpectNonOverlapping(plan);
  }
}

TEST(PlanTreePassesTest, FirstPassIsLeftChildrenAtEvenDepth) {
  // 0 -> (1, 2); 1 -> (3, 4); depth 2 = {3, 4, 5, 6}.
  const PassPlan plan = *PlanTreePasses(HeapTree({0, 1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(plan.passes.size(), 4u);
  EXPECT_EQ(plan.passes[0], (std::vector<LinkPair>{{3, 1}, {5, 2}}));
  EXPECT_EQ(plan.passes[1], (std::vector<LinkPair>{{4, 1}, {6, 2}}));
  EXPECT_EQ(plan.passes[2], (std::vector<LinkPair>{{1, 0}}));
  EXPECT_EQ(plan.passes[3], (std::vector<LinkPair>{{2, 0}}));
}

TEST(PlanTreePassesTest, RejectsMalformedTrees) {
  EXPECT_THAT(PlanTreePasses({{1, 0, true}, {1, 2, true}}).status().message(),
              HasSubstr("rank 1 has two parents"));
  EXPECT_THAT(PlanTreePasses({{1, 0, true}, {2, 0, true}}).status().message(),
              HasSubstr("rank 0 has two left"));
  EXPECT_THAT(PlanTreePasses({{1, 1, true}}).status().message(), HasSubstr("own parent"));
  EXPECT_THAT(PlanTreePasses({{1, 0, true}, {3, 2, true}}).status().message(),
              HasSubstr("2 roots"));
  EXPECT_THAT(PlanTreePasses({{1, 0, true}, {2, 3, true}, {3, 2, false}}).status().message(),
              HasSubstr("cycle"));
  EXPECT_THAT(PlanTreePasses({})->passes, IsEmpty());
}

TEST(FindSlowLinksTest, FlagsLinksAboveTheMedian) {
  const PassPlan plan = *PlanRingPasses({0, 1, 2, 3, 4});
  std::vector<LinkMeasurement> m;
  for (int i = 0; i < 5; ++i) {
    for (int rep = 0; rep < 3; ++rep) {
      // Link 2->3 is 3x slower; link 4->0 is 5% slower (within the 10%).
      const double ms = i == 2 ? 30.0 + rep : (i == 4 ? 10.5 : 10.0);
      m.push_back({i, (i + 1) % 5, absl::Milliseconds(ms)});
    }
  }
  const std::vector<SlowLink> slow = *FindSlowLinks(plan, m);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].src, 2);
  EXPECT_EQ(slow[0].dst, 3);
  EXPECT_EQ(slow[0].pass, 0);
  EXPECT_EQ(slow[0].time, absl::Milliseconds(31));
  EXPECT_DOUBLE_EQ(slow[0].ratio, 3.1);
}

TEST(FindSlowLinksTest, RejectsIncompleteOrForeignMeasurements) {
  const PassPlan plan = *PlanRingPasses({0, 1, 2});
  std::vector<LinkMeasurement> m = {{0, 1, absl::Milliseconds(1)}, {1, 2, absl::Milliseconds(1)}};
  EXPECT_THAT(FindSlowLinks(plan, m).status().message(), HasSubstr("link 2->0 (pass 2)"));
  m.push_back({2, 0, absl::Milliseconds(1)});
  m.push_back({0, 2, absl::Milliseconds(1)});
  EXPECT_THAT(FindSlowLinks(plan, m).status().message(), HasSubstr("0->2 was measured"));
  m.pop_back();
  m[0].time = absl::ZeroDuration();
  EXPECT_THAT(FindSlowLinks(plan, m).status().message(), HasSubstr("<= 0"));
  m[0].time = absl::Milliseconds(1);
  EXPECT_THAT(*FindSlowLinks(plan, m), IsEmpty());
  EXPECT_FALSE(FindSlowLinks(plan, m, 0).ok());
}

TEST(AssignRoundsTest, TasksOnDisjointNodesShareARound) {
  // A GEMM on every node, then the passes of two node-local groups and of a cross-node group.
  const std::vector<std::vector<std::string>> footprints = {{"n0", "n1", "n2", "n3"},
                                                            {"n0"},
                                                            {"n1"},
                                                            {"n0"},
                                                            {"n1"},
                                                            {"n0", "n2"},
                                                            {"n1", "n3"},
                                                            {"n2", "n0"}};
  EXPECT_THAT(AssignRounds(footprints), ::testing::ElementsAre(1, 2, 2, 3, 3, 4, 4, 5));
}

TEST(AssignRoundsTest, NoTwoTasksOfARoundShareANode) {
  std::vector<std::vector<std::string>> footprints;
  for (int i = 0; i < 200; ++i) {
    footprints.push_back({absl::StrCat("n", (i * 7) % 13), absl::StrCat("n", (i * 5 + 3) % 13)});
  }
  footprints.push_back({});  // No nodes: alone in its round.
  const std::vector<uint32_t> rounds = AssignRounds(footprints);
  ASSERT_EQ(rounds.size(), footprints.size());
  std::map<uint32_t, std::set<std::string>> used;
  for (size_t i = 0; i + 1 < footprints.size(); ++i) {
    ASSERT_GE(rounds[i], 1u);
    std::set<std::string> mine(footprints[i].begin(), footprints[i].end());
    for (const std::string& n : mine) EXPECT_TRUE(used[rounds[i]].insert(n).second) << i;
  }
  EXPECT_EQ(used.count(rounds.back()), 0u);
  EXPECT_TRUE(AssignRounds({}).empty());
}

TEST(ReversedTest, TurnsEveryLinkAroundAndKeepsPassesDisjoint) {
  const PassPlan ring = *PlanRingPasses({10, 11, 12, 13});
  const PassPlan back = Reversed(ring);
  ASSERT_EQ(back.passes.size(), ring.passes.size());
  for (size_t p = 0; p < ring.passes.size(); ++p) {
    ASSERT_EQ(back.passes[p].size(), ring.passes[p].size());
    for (size_t i = 0; i < ring.passes[p].size(); ++i) {
      EXPECT_EQ(back.passes[p][i], (LinkPair{ring.passes[p][i].dst, ring.passes[p][i].src}));
    }
  }
  EXPECT_TRUE(Reversed(PassPlan()).passes.empty());
}

TEST(SeparateOpposingLinksTest, NoPassCrossesTwoNodesBothWays) {
  // Ranks 0, 1 on node a, 2, 3 on node b: the ring's odd pass 1 -> 2, 3 -> 0 crosses a -> b and
  // b -> a, and is split; the even pass (inside each node) is not.
  auto node_of = [](int64_t r) { return std::string(r < 2 ? "a" : "b"); };
  absl::StatusOr<PassPlan> ring = PlanRingPasses({0, 1, 2, 3});
  ASSERT_TRUE(ring.ok());
  const PassPlan split = SeparateOpposingLinks(*ring, node_of);
  ASSERT_EQ(split.passes.size(), 3u);
  EXPECT_EQ(split.passes[0], (std::vector<LinkPair>{{0, 1}, {2, 3}}));
  EXPECT_EQ(split.passes[1], (std::vector<LinkPair>{{1, 2}}));
  EXPECT_EQ(split.passes[2], (std::vector<LinkPair>{{3, 0}}));
  const PassPlan back = SeparateOpposingLinks(Reversed(*ring), node_of);
  EXPECT_EQ(back.passes.size(), 3u);
  // Every link kept once, and no pass holds an opposing pair.
  for (const PassPlan* plan : {&split, &back}) {
    size_t links = 0;
    for (const auto& pass : plan->passes) {
      links += pass.size();
      for (const LinkPair& x : pass) {
        for (const LinkPair& y : pass) {
          EXPECT_FALSE(node_of(x.src) == node_of(y.dst) && node_of(x.dst) == node_of(y.src) &&
                       node_of(x.src) != node_of(x.dst))
              << x.src << "->" << x.dst << " beside " << y.src << "->" << y.dst;
        }
      }
    }
    EXPECT_EQ(links, 4u);
  }
}

TEST(SeparateOpposingLinksTest, SameDirectionAndUnknownNodesStayTogether) {
  // Ranks 0..3 on a, 4..7 on b: the pass 0 -> 4, 1 -> 5 crosses a -> b twice: one pass.
  auto node_of = [](int64_t r) { return r < 0 ? std::string() : std::string(r < 4 ? "a" : "b"); };
  PassPlan plan;
  plan.passes = {{{0, 4}, {1, 5}}, {{4, 0}, {1, 5}, {6, 2}}};
  PassPlan split = SeparateOpposingLinks(plan, node_of);
  ASSERT_EQ(split.passes.size(), 3u);
  EXPECT_EQ(split.passes[0], (std::vector<LinkPair>{{0, 4}, {1, 5}}));
  EXPECT_EQ(split.passes[1], (std::vector<LinkPair>{{4, 0}, {6, 2}}));
  EXPECT_EQ(split.passes[2], (std::vector<LinkPair>{{1, 5}}));
  // Unknown nodes oppose nothing.
  split = SeparateOpposingLinks(plan, [](int64_t) { return std::string(); });
  EXPECT_EQ(split.passes.size(), 2u);
}

}  // namespace
}  // namespace falcon::analysis::detect
