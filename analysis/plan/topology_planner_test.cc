#include "analysis/plan/topology_planner.h"

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Builds a layout from a map (dp, pp) -> node name, with `tp` ranks per TP group, ranks numbered
// in (dp, pp, tp) order.
Layout MakeLayout(int dp, int pp, int tp, const std::map<std::pair<int, int>, std::string>& node) {
  std::vector<RankPlacement> ranks;
  for (int d = 0; d < dp; ++d) {
    for (int p = 0; p < pp; ++p) {
      for (int t = 0; t < tp; ++t) {
        ranks.push_back({static_cast<int32_t>(ranks.size()), node.at({d, p}), d, p, t});
      }
    }
  }
  absl::StatusOr<Layout> layout = Layout::Create(ranks);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

// Paper Fig. 10/11: node1 (0,0), node2 (1,0), node3 (0,1), node4 (1,1) as (dp, pp); 2 GPUs each.
Layout FourNodes() {
  return MakeLayout(2, 2, 2,
                    {{{0, 0}, "node1"}, {{1, 0}, "node2"}, {{0, 1}, "node3"}, {{1, 1}, "node4"}});
}

int RankOn(const Layout& l, const std::string& node) {
  for (const RankPlacement& r : l.ranks()) {
    if (r.node == node) return r.rank;
  }
  return -1;
}

// Every rank keeps its node and tp index; Layout::Create already checked that the result is a
// complete grid with each TP group on one node.
void ExpectOnlyCellsMoved(const Layout& before, const Layout& after) {
  ASSERT_EQ(before.world_size(), after.world_size());
  for (int r = 0; r < before.world_size(); ++r) {
    EXPECT_EQ(after.at(r).node, before.at(r).node) << r;
    EXPECT_EQ(after.at(r).tp, before.at(r).tp) << r;
  }
}

TopologyPlannerOptions Options(absl::Duration compute, absl::Duration p2p, absl::Duration allreduce,
                               int64_t m) {
  TopologyPlannerOptions o;
  o.model.stage_compute = {compute};
  o.model.p2p = p2p;
  o.model.allreduce = allreduce;
  o.model.micro_batches = m;
  o.model.stage_state_bytes_per_rank = 1000;
  return o;
}

TEST(TopologyPlannerTest, PaperFourNodeSwapTakesTheLinkOutOfDp) {
  const Layout layout = FourNodes();
  const std::vector<SlowLink> links = {{RankOn(layout, "node3"), RankOn(layout, "node4"), 4.0}};
  const TopologyPlannerOptions o =
      Options(absl::Seconds(1), absl::Milliseconds(50), absl::Seconds(2), 8);
  absl::StatusOr<TopologyPlan> plan = PlanTopology(layout, links, {}, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectOnlyCellsMoved(layout, plan->layout);
  EXPECT_EQ(plan->slow_links_in_dp_before, 1);
  EXPECT_EQ(plan->slow_links_in_dp_after, 0);
  // Before: stage 1's all-reduce runs 4x slower (8 s). After: 9 micro-batch slots + 2 s.
  EXPECT_EQ(plan->before.allreduce, absl::Seconds(8));
  EXPECT_EQ(plan->after.allreduce, absl::Seconds(2));
  EXPECT_LT(plan->after.iteration, plan->before.iteration);
  // Like the paper's swap, two nodes (4 ranks) change stage.
  EXPECT_EQ(plan->ranks_changing_stage, 4);
  EXPECT_EQ(plan->bytes_to_move, 4 * 1000);

  // The paper's own swap, node2 -> (0,1) and node3 -> (1,0), leaves 3-4 as a PP link; the planner
  // finds a layout at least as good (here the link carries nothing at all).
  std::vector<RankPlacement> swapped = layout.ranks();
  for (RankPlacement& r : swapped) {
    if (r.node == "node2") r.dp = 0, r.pp = 1;
    if (r.node == "node3") r.dp = 1, r.pp = 0;
  }
  const Layout paper = *Layout::Create(swapped);
  absl::StatusOr<IterationEstimate> paper_estimate =
      EstimateIteration(*LayoutTiming(paper, links, {}, o.model));
  ASSERT_TRUE(paper_estimate.ok());
  EXPECT_EQ(paper_estimate->allreduce, absl::Seconds(2));
  EXPECT_LE(plan->after.iteration, paper_estimate->iteration);
  EXPECT_LT(paper_estimate->iteration, plan->before.iteration);
}

TEST(TopologyPlannerTest, TwoNodesMoveTheCongestedLinkIntoPp) {
  // Each node holds one whole pipeline, so every stage's DP all-reduce crosses the slow link.
  // The only fix, as in the paper, is to make the link a PP link: node A takes stage 0 of both
  // replicas and node B stage 1.
  const Layout layout =
      MakeLayout(2, 2, 4, {{{0, 0}, "A"}, {{0, 1}, "A"}, {{1, 0}, "B"}, {{1, 1}, "B"}});
  const std::vector<SlowLink> links = {{0, 8, 3.0}};
  absl::StatusOr<TopologyPlan> plan = PlanTopology(
      layout, links, {}, Options(absl::Seconds(1), absl::Milliseconds(20), absl::Seconds(1), 8));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectOnlyCellsMoved(layout, plan->layout);
  EXPECT_EQ(plan->slow_links_in_dp_after, 0);
  EXPECT_EQ(plan->slow_links_in_pp_after, 1);
  EXPECT_EQ(plan->layout.NodeAt(0, 0), plan->layout.NodeAt(1, 0));
  EXPECT_EQ(plan->layout.NodeAt(0, 1), plan->layout.NodeAt(1, 1));
  EXPECT_EQ(plan->ranks_changing_stage, 8);  // one TP group from each node
  EXPECT_EQ(plan->before.allreduce, absl::Seconds(3));
  EXPECT_EQ(plan->after.allreduce, absl::Seconds(1));
  // Cycles 1 + 0.06 (p2p 3x slower) per stage: 2 x 1.06 + 7 x 1.06 + 1 s all-reduce.
  EXPECT_EQ(plan->after.iteration, absl::Seconds(9 * 1.06 + 1));
}

TEST(TopologyPlannerTest, PaperTwoStragglerExample) {
  // FALCON paper §5, straggler consolidation example: P = 3, m = 4, micro-batch 1 s, stragglers 1.5
  // s; two stragglers in two stages of one pipeline: 8.5 s; packed into one (interior) stage: 8 s.
  std::map<std::pair<int, int>, std::string> nodes;
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 3; ++p) nodes[{d, p}] = "n" + std::to_string(d * 3 + p);
  }
  const Layout layout = MakeLayout(2, 3, 1, nodes);
  const std::vector<SlowRank> slow = {{layout.RankAt(0, 1, 0), 1.5}, {layout.RankAt(0, 2, 0), 1.5}};
  absl::StatusOr<TopologyPlan> plan = PlanTopology(
      layout, {}, slow, Options(absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration(), 4));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectOnlyCellsMoved(layout, plan->layout);
  EXPECT_EQ(plan->before.iteration, absl::Seconds(8.5));
  EXPECT_EQ(plan->after.iteration, absl::Seconds(8));
  EXPECT_EQ(plan->straggler_stages_before, 2);
  EXPECT_EQ(plan->straggler_stages_after, 1);
  for (const SlowRank& s : slow) EXPECT_EQ(plan->layout.at(s.rank).pp, 1);  // interior stage
  EXPECT_EQ(plan->ranks_changing_stage, 2);
  EXPECT_THAT(plan->moved_ranks, ElementsAre(layout.RankAt(0, 2, 0), layout.RankAt(1, 1, 0)));
}

TEST(TopologyPlannerTest, SixStragglersSpanTwoStagesOfFour) {
  // FALCON paper §7, straggler consolidation (4DP, 4PP, 16 GPUs): with 6 stragglers one stage holds
  // only 4, so they need 2. Here replicas 0 and 1 each have three slow stages; afterwards no
  // replica has more than two.
  std::map<std::pair<int, int>, std::string> nodes;
  for (int d = 0; d < 4; ++d) {
    for (int p = 0; p < 4; ++p) nodes[{d, p}] = "n" + std::to_string(p / 2);  // 8 GPUs per node
  }
  const Layout layout = MakeLayout(4, 4, 1, nodes);
  std::vector<SlowRank> slow;
  for (auto [d, p] : {std::pair{0, 1}, {0, 2}, {0, 3}, {1, 1}, {1, 2}, {1, 3}}) {
    slow.push_back({layout.RankAt(d, p, 0), 1.6});
  }
  absl::StatusOr<TopologyPlan> plan = PlanTopology(
      layout, {}, slow, Options(absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration(), 8));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->straggler_stages_before, 3);
  EXPECT_EQ(plan->straggler_stages_after, 2);
  std::set<int> stages;
  for (const SlowRank& s : slow) stages.insert(plan->layout.at(s.rank).pp);
  EXPECT_EQ(stages, (std::set<int>{1, 2}));  // both interior
  EXPECT_LT(plan->after.iteration, plan->before.iteration);
}

TEST(TopologyPlannerTest, HeavyEndStageSendsStragglerInside) {
  std::map<std::pair<int, int>, std::string> nodes;
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 4; ++p) nodes[{d, p}] = "n" + std::to_string(d);
  }
  const Layout layout = MakeLayout(2, 4, 1, nodes);
  TopologyPlannerOptions o =
      Options(absl::Seconds(1), absl::ZeroDuration(), absl::ZeroDuration(), 8);
  o.model.stage_compute = {absl::Seconds(1.3), absl::Seconds(1), absl::Seconds(1),
                           absl::Seconds(1.3)};
  absl::StatusOr<TopologyPlan> plan = PlanTopology(layout, {}, {{0, 1.5}}, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NE(plan->layout.at(0).pp, 0);
  EXPECT_NE(plan->layout.at(0).pp, 3);
  EXPECT_LT(plan->after.iteration, plan->before.iteration);
}

TEST(TopologyPlannerTest, PipelineOnlyJobAvoidsSlowPpHop) {
  // D = 1, four nodes in a chain; the link between stages 1 and 2 is slow. Reordering the
  // stages' nodes keeps that pair from being adjacent.
  const Layout layout =
      MakeLayout(1, 4, 2, {{{0, 0}, "a"}, {{0, 1}, "b"}, {{0, 2}, "c"}, {{0, 3}, "d"}});
  absl::StatusOr<TopologyPlan> plan =
      PlanTopology(layout, {{2, 4, 10.0}}, {},
                   Options(absl::Seconds(1), absl::Milliseconds(100), absl::ZeroDuration(), 8));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->slow_links_in_pp_before, 1);
  EXPECT_EQ(plan->slow_links_in_pp_after, 0);
  // Healthy chain: cycles 1.1, 1.2, 1.2, 1.1 s -> 4.6 + 7 x 1.2 = 13 s.
  EXPECT_EQ(plan->after.iteration, absl::Seconds(13));
  EXPECT_LT(plan->after.iteration, plan->before.iteration);
}

TEST(TopologyPlannerTest, KeepsLayoutWhenNothingHelps) {
  // Pure DP: every pair of nodes shares the only stage, so S3 cannot help.
  const Layout layout = MakeLayout(2, 1, 1, {{{0, 0}, "a"}, {{1, 0}, "b"}});
  absl::StatusOr<TopologyPlan> plan = PlanTopology(layout, {{0, 1, 2.0}}, {}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->layout, layout);
  EXPECT_THAT(plan->moved_ranks, IsEmpty());
  EXPECT_EQ(plan->after.iteration, plan->before.iteration);
  EXPECT_THAT(plan->notes, ElementsAre(HasSubstr("no layout found with a predicted gain")));
  // Intra-node links are ignored with a note; nothing at all to plan.
  const Layout one_node = MakeLayout(2, 1, 1, {{{0, 0}, "a"}, {{1, 0}, "a"}});
  plan = PlanTopology(one_node, {{0, 1, 2.0}}, {}, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->notes, ElementsAre(HasSubstr("slow_links[0]: ranks 0 and 1 share node a"),
                                       HasSubstr("nothing to plan")));
}

TEST(TopologyPlannerTest, BadInputNamesTheField) {
  const Layout layout = FourNodes();
  auto error = [&](const std::vector<SlowLink>& l, const std::vector<SlowRank>& r,
                   TopologyPlannerOptions o = {}) {
    absl::StatusOr<TopologyPlan> plan = PlanTopology(layout, l, r, o);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(plan.status().message());
  };
  EXPECT_THAT(error({{0, 8, 2.0}}, {}), HasSubstr("slow_links[0].dst_rank: 8 is not a rank"));
  EXPECT_THAT(error({{3, 3, 2.0}}, {}), HasSubstr("slow_links[0]: src_rank and dst_rank"));
  EXPECT_THAT(error({{0, 7, std::nan("")}}, {}), HasSubstr("slow_links[0].slowdown"));
  EXPECT_THAT(error({}, {{1, 0.5}}), HasSubstr("slow_ranks[0].slowdown: must be in [1, 1000]"));
  EXPECT_THAT(error({}, {{-1, 2.0}}), HasSubstr("slow_ranks[0].rank: -1"));
  TopologyPlannerOptions o;
  o.model.stage_compute = {absl::Seconds(1), absl::Seconds(1), absl::Seconds(1)};
  EXPECT_THAT(error({}, {}, o), HasSubstr("stage_compute: has 3 entries, want 1 or P = 2"));
  o = {};
  o.model.micro_batches = 0;
  EXPECT_THAT(error({}, {}, o), HasSubstr("micro_batches"));
  // Unbounded, the cost model's durations saturate and the planner reports an infinite time.
  o.model.micro_batches = kMaxReplicaMicroBatches + 1;
  EXPECT_THAT(error({}, {}, o), HasSubstr("micro_batches: must be in [1, 1000000], got 1000001"));
  o.model.micro_batches = int64_t{9'000'000'000'000'000'000};
  EXPECT_THAT(error({}, {}, o), HasSubstr("micro_batches: must be in [1, 1000000]"));
  // At the bound, with every other input at its own bound, times stay finite.
  o.model.micro_batches = kMaxReplicaMicroBatches;
  o.model.stage_compute = {absl::Hours(1)};
  o.model.p2p = absl::Hours(1);
  o.model.allreduce = absl::Hours(1);
  absl::StatusOr<TopologyPlan> plan =
      PlanTopology(FourNodes(), {{2, 6, 1000.0}, {0, 4, 1000.0}}, {{1, 1000.0}}, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LT(plan->before.iteration, absl::Hours(1e10));
  EXPECT_LT(plan->after.iteration, absl::Hours(1e10));
  EXPECT_THAT(PlanTopology(Layout(), {}, {}, {}).status().message(), HasSubstr("layout: empty"));
}

TEST(TopologyPlannerTest, RandomJobsKeepInvariantsAndNeverGetWorse) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 60; ++iter) {
    const int dp = 1 + static_cast<int>(rng() % 4), pp = 1 + static_cast<int>(rng() % 5);
    const int tp = 1 + static_cast<int>(rng() % 2);
    const int per_node = 1 + static_cast<int>(rng() % 3);  // TP groups per node
    std::map<std::pair<int, int>, std::string> nodes;
    int cell = 0;
    for (int d = 0; d < dp; ++d) {
      for (int p = 0; p < pp; ++p) nodes[{d, p}] = "n" + std::to_string(cell++ / per_node);
    }
    const Layout layout = MakeLayout(dp, pp, tp, nodes);
    const int world = layout.world_size();
    std::vector<SlowLink> links;
    std::vector<SlowRank> ranks;
    for (int i = 0; i < static_cast<int>(rng() % 3); ++i) {
      const int a = static_cast<int>(rng() % world), b = static_cast<int>(rng() % world);
      if (a != b) links.push_back({a, b, 1.0 + static_cast<double>(rng() % 40) / 10});
    }
    for (int i = 0; i < static_cast<int>(rng() % 4); ++i) {
      ranks.push_back(
          {static_cast<int32_t>(rng() % world), 1.0 + static_cast<double>(rng() % 10) / 10});
    }
    const TopologyPlannerOptions o =
        Options(absl::Seconds(1), absl::Milliseconds(30), absl::Milliseconds(700), 6);
    absl::StatusOr<TopologyPlan> plan = PlanTopology(layout, links, ranks, o);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectOnlyCellsMoved(layout, plan->layout);
    EXPECT_LE(plan->after.iteration, plan->before.iteration);
    // The reported prediction is the cost model's view of the returned layout.
    EXPECT_EQ(plan->after.iteration,
              EstimateIteration(*LayoutTiming(plan->layout, links, ranks, o.model))->iteration);
    int64_t bytes = 0;
    std::vector<int32_t> moved;
    for (int r = 0; r < world; ++r) {
      if (plan->layout.at(r).pp != layout.at(r).pp) bytes += 1000;
      if (plan->layout.at(r).pp != layout.at(r).pp || plan->layout.at(r).dp != layout.at(r).dp) {
        moved.push_back(r);
      }
    }
    EXPECT_EQ(plan->bytes_to_move, bytes);
    EXPECT_EQ(plan->moved_ranks, moved);
    absl::StatusOr<TopologyPlan> again = PlanTopology(layout, links, ranks, o);
    EXPECT_EQ(again->layout, plan->layout);  // deterministic
  }
}

}  // namespace
}  // namespace falcon::analysis::plan
