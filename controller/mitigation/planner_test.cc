#include "controller/mitigation/planner.h"

#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/mitigation/fake_event_actions.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

// DP=4 x PP=2, rank r at dp = r % 4, pp = r / 4; consecutive ranks share a node (node0 = {0, 1},
// node1 = {2, 3}, ...), so the stage-0 DP communicator spans node0 and node1.
JobShape Shape(int64_t m = 32) {
  std::vector<analysis::plan::RankPlacement> ranks;
  for (int r = 0; r < 8; ++r) {
    analysis::plan::RankPlacement p;
    p.rank = r;
    p.node = "node" + std::to_string(r / 2);
    p.dp = r % 4;
    p.pp = r / 4;
    ranks.push_back(p);
  }
  JobShape s;
  s.layout = *analysis::plan::Layout::Create(ranks);
  s.global_micro_batches = m;
  s.micro_batches = EvenSplit(m, 4, 2);
  return s;
}

// Shape(64) with 16 blocks of 1000 bytes: a pipeline S2L can re-split.
JobShape SplitShape() {
  JobShape shape = Shape(64);
  shape.pipeline_blocks = 16;
  shape.block_state_bytes = 1000;
  return shape;
}

// A compute culprit: `rank`, the probe's stage slowdown and the job's slowdown ratio.
Culprit ComputeCulprit(uint32_t rank, double measured_stage_slowdown, double slowdown_ratio) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {rank};
  c.measured_stage_slowdown = measured_stage_slowdown;
  c.slowdown_ratio = slowdown_ratio;
  return c;
}

TEST(PlannerTest, EvenSplitAndStageSlowdown) {
  EXPECT_EQ(EvenSplit(32, 4, 2), (std::vector<uint32_t>{8, 8, 8, 8}));
  EXPECT_EQ(EvenSplit(18, 4, 2), (std::vector<uint32_t>{6, 4, 4, 4}));
  // One stage slowed by s: slow = (P-1)c + m s c, healthy = (m + P - 1)c.
  EXPECT_NEAR(StageSlowdown(1.4, 8, 2), 1.45, 1e-9);
  EXPECT_EQ(StageSlowdown(0.9, 8, 2), 1.0);
  // A measured stage slowdown (the culprit's compute per micro-batch over its peers') wins.
  Culprit c;
  c.slowdown_ratio = 1.4;
  EXPECT_NEAR(CulpritStageSlowdown(c, 8, 2), 1.45, 1e-9);
  c.measured_stage_slowdown = 1.6;
  EXPECT_DOUBLE_EQ(CulpritStageSlowdown(c, 8, 2), 1.6);
}

TEST(PlannerTest, S2ShedsMoreWorkForALargerMeasuredStageSlowdown) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {5};           // dp 1, pp 1
  c.slowdown_ratio = 1.2;  // Diluted in the job's iteration time...
  absl::StatusOr<S2Plan> diluted = PlanS2(Shape(64), c, absl::Milliseconds(100));
  c.measured_stage_slowdown = 1.5;  // ... while the rank itself runs 1.5x slower.
  absl::StatusOr<S2Plan> measured = PlanS2(Shape(64), c, absl::Milliseconds(100));
  ASSERT_TRUE(diluted.ok() && measured.ok());
  EXPECT_LT(measured->micro_batches[1], diluted->micro_batches[1])
      << diluted->summary << " vs " << measured->summary;
}

TEST(PlannerTest, S2ShiftsMicroBatchesAwayFromTheSlowGroup) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {5};  // dp 1, pp 1
  c.slowdown_ratio = 1.4;
  absl::StatusOr<S2Plan> p = PlanS2(Shape(), c, absl::Milliseconds(100));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->micro_batches.size(), 4u);
  EXPECT_EQ(std::accumulate(p->micro_batches.begin(), p->micro_batches.end(), 0u), 32u);
  for (uint32_t m : p->micro_batches) EXPECT_EQ(m % 2, 0u);
  EXPECT_LT(p->micro_batches[1], 8u);
  for (int d : {0, 2, 3}) EXPECT_GE(p->micro_batches[d], 8u);
  EXPECT_TRUE(p->improves);
  EXPECT_LT(p->predicted, p->predicted_current);
  EXPECT_NE(p->summary.find("was [8, 8, 8, 8]"), std::string::npos) << p->summary;
  // Too few micro-batches to move (every group needs >= PP): no better plan.
  absl::StatusOr<S2Plan> tight = PlanS2(Shape(8), c, absl::Milliseconds(100));
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->improves);
  // No culprit in the layout.
  c.ranks = {42};
  EXPECT_EQ(PlanS2(Shape(), c, absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlannerTest, S3TakesTheSlowLinkOutOfTheDpCommunicator) {
  // node0 -> node1: both in the stage-0 DP communicator.
  absl::StatusOr<S3Plan> p = PlanS3(Shape(), LinkCulprit(), absl::Milliseconds(100));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->improves) << p->summary;
  EXPECT_NE(p->summary.find("slow links in DP 1 -> 0"), std::string::npos) << p->summary;
  EXPECT_EQ(p->change.assignments_size(), 8);
  // The new layout is a full 4 x 2 grid.
  EXPECT_EQ(p->layout.dp_size(), 4);
  EXPECT_EQ(p->layout.pp_size(), 2);
}

// Over an S2L split the topology model (even pipelines) does not apply: S3 says so rather than
// plan a layout that might move the slow rank off the stage the split shrank.
TEST(PlannerTest, S3IsNotApplicableWhileALayerSplitIsInForce) {
  const Culprit c = LinkCulprit();
  JobShape shape = SplitShape();
  ASSERT_TRUE(PlanS3(shape, c, absl::Milliseconds(100)).ok());
  shape.layer_split = std::vector<common::StageBlocks>(4, {8, 8});  // Even: the model's own.
  ASSERT_TRUE(PlanS3(shape, c, absl::Milliseconds(100)).ok());
  shape.layer_split = {{8, 8}, {8, 8}, {6, 10}, {8, 8}};
  absl::StatusOr<S3Plan> p = PlanS3(shape, c, absl::Milliseconds(100));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
  EXPECT_NE(p.status().message().find("a layer split is in force (S2L: dp2 6+10)"),
            std::string::npos)
      << p.status();
}

falcon::v1::Link L(uint32_t src, uint32_t dst) {
  falcon::v1::Link l;
  l.set_src_rank(src);
  l.set_dst_rank(dst);
  return l;
}

// node2's NIC (docs/algorithms.md#node-nic-faults), with its links to node0 and node3 as the
// evidence.
Culprit Node2Nic() {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMMUNICATION;
  c.nodes = {"node2"};
  c.node_ranks = {4, 5};
  c.links = {L(5, 6), L(6, 5), L(7, 4), L(4, 7), L(0, 4), L(4, 0), L(1, 5), L(5, 1)};
  c.slowdown_ratio = 2.0;
  return c;
}

TEST(PlannerTest, S4ExcludesEveryRankOfACulpritNode) {
  Culprit c = Node2Nic();
  // Not the far ends of its links (6, 7, 0, 1): those nodes are fine.
  EXPECT_EQ(S4Excluded(c), (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(S4Summary(c), "restart without ranks [4, 5] (every rank of node node2, its NIC)");
  // A slow link elsewhere still loses its destination.
  c.links.push_back(L(0, 2));
  EXPECT_EQ(S4Excluded(c), (std::vector<uint32_t>{2, 4, 5}));
  // Links alone: their destinations, as before.
  Culprit links;
  links.cause = falcon::v1::CAUSE_COMMUNICATION;
  links.links = {L(0, 4), L(1, 5)};
  EXPECT_EQ(S4Excluded(links), (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(S4Summary(links), "restart without ranks [4, 5]");
}

// Slow links between nodes of two ranks each (node0 = {0, 1}, node1 = {2, 3}, ...), with the
// nodes CulpritOf finds for their ends.
Culprit SlowLinks(std::vector<falcon::v1::Link> links) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMMUNICATION;
  c.links = std::move(links);
  for (const falcon::v1::Link& k : c.links) {
    for (uint32_t r : {k.src_rank(), k.dst_rank()}) {
      const std::string node = absl::StrCat("node", r / 2);
      c.link_end_nodes[r] = node;
      c.link_node_ranks[node] = {r / 2 * 2, r / 2 * 2 + 1};
    }
  }
  return c;
}

// A one-direction cap node0 -> node1 as the PyTorch e2e job reads it: every link from node0's
// ranks to node1's, and one reverse link (the cap delays the acks of the other direction).
// node1, the side that receives the slow links, goes whole; not rank 0 as well.
TEST(PlannerTest, S4LeavesOutTheNodeThatCoversEverySlowLink) {
  Culprit c = SlowLinks({L(0, 2), L(0, 3), L(1, 2), L(1, 3), L(2, 0)});
  EXPECT_EQ(S4LinkCover(c), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(S4Excluded(c), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(S4Summary(c),
            "restart without ranks [2, 3] (every rank of node node1, at an end of "
            "the slow links)");
  // Both directions alike: node0 hosts the launchers' rendezvous and stays.
  EXPECT_EQ(S4LinkCover(SlowLinks({L(0, 2), L(2, 0)})), (std::vector<std::string>{"node1"}));
  // The node that touches most slow links goes, whichever way they run.
  EXPECT_EQ(S4Excluded(SlowLinks({L(4, 0), L(4, 2), L(4, 6)})), (std::vector<uint32_t>{4, 5}));
  // Links that share no node: one node each, the receiving side.
  EXPECT_EQ(S4LinkCover(SlowLinks({L(0, 4), L(2, 6)})),
            (std::vector<std::string>{"node2", "node3"}));
  EXPECT_EQ(S4Excluded(SlowLinks({L(0, 4), L(2, 6)})), (std::vector<uint32_t>{4, 5, 6, 7}));
}

// The node holding rank 0 (the launchers' rendezvous host) goes only for a link inside it, even
// when it touches the most slow links; the tie-break reads a node's lowest rank, not its ends'.
TEST(PlannerTest, S4CoversSlowLinksWithoutTheNodeOfRankZeroWhenItCan) {
  EXPECT_EQ(S4LinkCover(SlowLinks({L(0, 2), L(0, 4)})),
            (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(S4Excluded(SlowLinks({L(0, 2), L(0, 4)})), (std::vector<uint32_t>{2, 3, 4, 5}));
  EXPECT_EQ(S4LinkCover(SlowLinks({L(0, 1)})), (std::vector<std::string>{"node0"}));
  // Ranks interleaved over two nodes: nodeA = {0, 2}, nodeB = {1, 3}. The links 2 <-> 1 touch
  // both alike; nodeA holds rank 0, so nodeB goes.
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMMUNICATION;
  c.links = {L(2, 1), L(1, 2)};
  c.link_end_nodes = {{1, "nodeB"}, {2, "nodeA"}};
  c.link_node_ranks = {{"nodeA", {0, 2}}, {"nodeB", {1, 3}}};
  EXPECT_EQ(S4LinkCover(c), (std::vector<std::string>{"nodeB"}));
  EXPECT_EQ(S4Excluded(c), (std::vector<uint32_t>{1, 3}));
  // Ends without a node are ranks of their own, rank 0 last as well.
  Culprit bare;
  bare.cause = falcon::v1::CAUSE_COMMUNICATION;
  bare.links = {L(0, 3), L(3, 0)};
  EXPECT_EQ(S4Excluded(bare), (std::vector<uint32_t>{3}));
}

// An unknown verdict's ranks are those whose series slowed, not culprits: S4 leaves none out.
TEST(PlannerTest, S4ExcludesNothingForAnUnknownCause) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_UNKNOWN;
  c.ranks = {0, 1, 4, 5, 6, 7};
  EXPECT_TRUE(S4Excluded(c).empty());
}

TEST(PlannerTest, S3CannotKeepDpTrafficOffANicWhoseNodeHoldsPartOfAStage) {
  // node2 holds half of stage 1: its DP communicator crosses node2's NIC in any layout.
  absl::StatusOr<S3Plan> p = PlanS3(Shape(), Node2Nic(), absl::Milliseconds(100));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->improves) << p->summary;
  EXPECT_NE(p->summary.find("node node2's NIC: its links to 3 other nodes count as slow"),
            std::string::npos)
      << p->summary;
}

TEST(PlannerTest, S3MovesDpTrafficOffASlowNic) {
  // DP=2 x PP=3, rank r at dp = r % 2, pp = r / 2: n0 = {0, 2} (replica 0's stages 0 and 1),
  // n1 = {1, 3}, n2 = {4, 5} (stage 2). n0's NIC carries the DP all-reduce of stages 0 and 1.
  std::vector<analysis::plan::RankPlacement> ranks;
  for (int r = 0; r < 6; ++r) {
    analysis::plan::RankPlacement p;
    p.rank = r;
    p.dp = r % 2;
    p.pp = r / 2;
    p.node = r >= 4 ? "n2" : (r % 2 == 0 ? "n0" : "n1");
    ranks.push_back(p);
  }
  JobShape shape;
  shape.layout = *analysis::plan::Layout::Create(ranks);
  shape.global_micro_batches = 12;
  shape.micro_batches = EvenSplit(12, 2, 3);
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMMUNICATION;
  c.nodes = {"n0"};
  c.node_ranks = {0, 2};
  c.links = {L(0, 1), L(1, 0), L(2, 3), L(3, 2), L(2, 4), L(4, 2)};
  c.slowdown_ratio = 1.5;
  absl::StatusOr<S3Plan> p = PlanS3(shape, c, absl::Milliseconds(100));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->improves) << p->summary;
  EXPECT_NE(p->summary.find("slow links in DP 1 -> 0"), std::string::npos) << p->summary;
  // n0 now holds one whole stage: its DP all-reduce stays inside the node.
  EXPECT_EQ(p->layout.at(0).pp, p->layout.at(2).pp);
  EXPECT_NE(p->layout.at(0).dp, p->layout.at(2).dp);
}

TEST(PlannerTest, DryRunOfANodeNicGoesS1S3S4WithoutTheNode) {
  LadderState state;
  state.iteration = 100;
  absl::StatusOr<falcon::v1::DryRunPlanResponse> r =
      DryRun(Shape(), settings::EffectiveSettings(), Node2Nic(), absl::Milliseconds(100),
             absl::FromUnixSeconds(1000), state);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->actions_size(), 3);  // Communication: no S2.
  EXPECT_EQ(r->actions(1).strategy(), falcon::v1::STRATEGY_S3_TOPOLOGY);
  EXPECT_NE(r->actions(1).reason().find("no better layout"), std::string::npos)
      << r->actions(1).reason();
  EXPECT_EQ(r->actions(2).strategy(), falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART);
  EXPECT_NE(r->actions(2).reason().find(
                "restart without ranks [4, 5] (every rank of node node2, its NIC)"),
            std::string::npos)
      << r->actions(2).reason();
}

TEST(PlannerTest, DryRunLadderInCostOrderWithReasons) {
  settings::EffectiveSettings s;
  s.s3_enabled = false;
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {5};
  c.slowdown_ratio = 1.4;
  LadderState state;
  state.iteration = 200;
  absl::StatusOr<falcon::v1::DryRunPlanResponse> r =
      DryRun(Shape(), s, c, absl::Milliseconds(100), absl::FromUnixSeconds(1000), state);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->actions_size(), 4);
  EXPECT_EQ(r->actions(0).strategy(), falcon::v1::STRATEGY_S1_IGNORE);
  EXPECT_EQ(r->actions(1).strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(r->actions(2).strategy(), falcon::v1::STRATEGY_S3_TOPOLOGY);
  EXPECT_EQ(r->actions(3).strategy(), falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART);
  for (const auto& a : r->actions()) EXPECT_TRUE(a.dry_run());
  // S2 costs 5 x 40 ms = 0.2 s: 5 slow iterations.
  EXPECT_NE(r->actions(1).reason().find("when lost >= 0.200 s"), std::string::npos)
      << r->actions(1).reason();
  // Each step at the iteration the lost time pays for it: S1 now, S2 5 slow iterations on (0.2 s
  // at 40 ms each), S3 60 s / 40 ms = 1500 on, S4 15000 on.
  EXPECT_EQ(r->actions(0).iteration(), 200);
  EXPECT_EQ(r->actions(1).iteration(), 205);
  EXPECT_EQ(r->actions(2).iteration(), 1700);
  EXPECT_EQ(r->actions(3).iteration(), 15200);
  EXPECT_NE(r->actions(2).reason().find("disabled"), std::string::npos);
  EXPECT_NE(r->actions(3).reason().find("without ranks [5]"), std::string::npos);
  EXPECT_EQ(r->micro_batch_plan().micro_batches_size(), 4);
  EXPECT_GT(r->predicted_iteration_time_s(), 0.1);
  EXPECT_LT(r->predicted_iteration_time_s(), 0.14);
}

TEST(PlannerTest, DryRunShowsTakenStepsWhereTheyHappenedAndProjectsTheRest) {
  settings::EffectiveSettings s;
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {5};
  c.slowdown_ratio = 1.4;
  LadderState state;
  state.iteration = 300;
  state.lost = absl::Seconds(1);  // S3 (60 s) needs 59 s more: 1475 iterations at 40 ms.
  state.taken[falcon::v1::STRATEGY_S1_IGNORE] = {90, "applied at iteration 90: costs nothing"};
  state.taken[falcon::v1::STRATEGY_S2_MICRO_BATCH] = {96, "applied at iteration 96: lost"};
  absl::StatusOr<falcon::v1::DryRunPlanResponse> r =
      DryRun(Shape(), s, c, absl::Milliseconds(100), absl::FromUnixSeconds(1000), state);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->actions_size(), 4);
  EXPECT_EQ(r->actions(0).iteration(), 90);
  EXPECT_EQ(r->actions(1).iteration(), 96);
  EXPECT_EQ(r->actions(1).reason().rfind("applied at iteration 96: lost; m = [", 0), 0u)
      << r->actions(1).reason();
  EXPECT_EQ(r->actions(2).iteration(), 300 + 1475);
  EXPECT_NE(r->actions(2).reason().find("after ~1475 more slow iterations"), std::string::npos)
      << r->actions(2).reason();
}

// The S2L rung: a compute culprit of a pipeline with blocks to move sits between S2 and S3 (its
// cost the plan's bytes over the bandwidth plus the pause), with its plan in layer_split.
TEST(PlannerTest, DryRunLaddersS2LWithItsSplitAndCost) {
  JobShape shape = Shape(64);
  shape.pipeline_blocks = 16;
  shape.block_state_bytes = 500'000'000;
  ASSERT_TRUE(Resplittable(shape));
  EXPECT_EQ(SplitInForce(shape), std::vector<common::StageBlocks>(4, {8, 8}));
  settings::EffectiveSettings s;
  s.s2l_enabled = true;       // Opt-in.
  s.s2_cost_iterations = 50;  // 50 x 80 ms = 4 s.
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {2};  // dp 2, stage 0.
  c.slowdown_ratio = 250.0 / 170.0;
  c.measured_stage_slowdown = 1.5;
  absl::StatusOr<falcon::v1::DryRunPlanResponse> r =
      DryRun(shape, s, c, absl::Milliseconds(170), absl::FromUnixSeconds(1000), LadderState{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->actions_size(), 5);
  // S2L: 2 blocks x 0.5 GB at 1 GB/s + 1 s = 2 s, before S2's 4 s.
  EXPECT_EQ(r->actions(1).strategy(), falcon::v1::STRATEGY_S2L_LAYER_SPLIT);
  EXPECT_NE(r->actions(1).reason().find("when lost >= 2.000 s (1000000000 bytes / 1e+09 bytes/s "
                                        "(setting) + pause 1s (setting))"),
            std::string::npos)
      << r->actions(1).reason();
  EXPECT_NE(r->actions(1).reason().find("split dp2 6+10 (was even)"), std::string::npos);
  EXPECT_EQ(r->actions(2).strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(r->actions(3).strategy(), falcon::v1::STRATEGY_S3_TOPOLOGY);
  ASSERT_EQ(r->layer_split().replicas_size(), 4);
  EXPECT_EQ(r->layer_split().replicas(2).stage_blocks(0), 6u);
  EXPECT_EQ(std::accumulate(r->layer_split().micro_batches().begin(),
                            r->layer_split().micro_batches().end(), 0u),
            64u);
  // The first plan that improves is S2L's: 180 ms.
  EXPECT_NEAR(r->predicted_iteration_time_s(), 0.180, 1e-6);
  // A measured pause and bandwidth replace the settings: 1e9 bytes at 4e9 bytes/s + 0.25 s.
  r = DryRun(shape, s, c, absl::Milliseconds(170), absl::FromUnixSeconds(1000), LadderState{},
             analysis::plan::S2LMeasurement{absl::Milliseconds(250), 4e9});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->actions(1).reason().find("when lost >= 0.500 s (1000000000 bytes / 4e+09 bytes/s "
                                        "(measured) + pause 0.25s (measured))"),
            std::string::npos)
      << r->actions(1).reason();
  // Without blocks to move, no S2L rung (as the escalation's candidates).
  shape.pipeline_blocks = 2;
  r = DryRun(shape, s, c, absl::Milliseconds(170), absl::FromUnixSeconds(1000), LadderState{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->actions_size(), 4);
  EXPECT_FALSE(r->has_layer_split());
}

// A compute slowdown the job's iteration time shows diluted (the all-reduce and the optimizer step
// are not stretched): S2L models that share of the iteration as a fixed cost, predicts the slowed
// job near what it measured, and predicts it faster than a model that stretches the whole
// iteration (the plan itself is the same).
TEST(PlannerTest, S2LModelsTheShareOfAnIterationTheSlowdownStretches) {
  const JobShape shape = SplitShape();
  // Rank 2: dp 2, stage 0. The job's x1.43 as measured on the netns demo.
  Culprit c = ComputeCulprit(2, 1.85, 1.43);
  // StageSlowdown(1.43, 16, 2) = 1 + 0.43 x 17/16 = 1.457; (1.457 - 1) / 0.85 = 0.54.
  EXPECT_NEAR(ComputeFraction(c, 16, 2), 0.5375, 1e-3);
  const absl::Duration healthy = absl::Milliseconds(400);
  absl::StatusOr<S2LPlan> diluted = PlanS2L(shape, c, healthy);
  ASSERT_TRUE(diluted.ok()) << diluted.status();
  ASSERT_TRUE(diluted->ceiling.has_value());
  // The model's slowed job is the measured one (1.43 x 400 ms), not 1.85 x the slot's.
  EXPECT_NEAR(diluted->ceiling->slowed_iteration_time_ns() * 1e-9, 1.43 * 0.4, 0.02);
  EXPECT_NE(diluted->summary.find("pipeline 54% of an iteration"), std::string::npos)
      << diluted->summary;
  Culprit whole = c;
  whole.slowdown_ratio = 1.0;  // No job ratio to compare with: the whole iteration stretches.
  EXPECT_DOUBLE_EQ(ComputeFraction(whole, 16, 2), 1.0);
  absl::StatusOr<S2LPlan> stretched = PlanS2L(shape, whole, healthy);
  ASSERT_TRUE(stretched.ok()) << stretched.status();
  // The fixed cost is the same in every group: the plan follows the stage slowdown alone, the
  // prediction the share too.
  EXPECT_EQ(diluted->micro_batches, stretched->micro_batches);
  EXPECT_EQ(diluted->split, stretched->split);
  EXPECT_LT(diluted->predicted, stretched->predicted);
  // Never below 5% compute.
  c.slowdown_ratio = 1.0001;
  EXPECT_DOUBLE_EQ(ComputeFraction(c, 16, 2), 0.05);
}

// The culprit's pipeline peer given more blocks takes that much longer: its whole slot is compute
// (the fixed cost is per iteration, not per slot). As measured on the netns demo with the steady
// emulated device: x1.43 per block on rank 2 (dp 2, stage 0), the job x1.27, healthy 0.32 s. A
// peer holding 10 of 16 blocks runs 10/8 of a healthy slot, so the culprit's group takes 13
// micro-batches (13 x 10 + 8.6 < 17 x 8 + 8, the healthy groups' 17), not 14, which ran 0.35 s
// where the model that put the fixed cost on each slot predicted 0.338 s.
TEST(PlannerTest, S2LGivesThePeerWithMoreBlocksProportionallyMoreTime) {
  absl::StatusOr<S2LPlan> plan =
      PlanS2L(SplitShape(), ComputeCulprit(2, 1.43, 1.27), absl::Milliseconds(320));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->micro_batches, (std::vector<uint32_t>{17, 17, 13, 17})) << plan->summary;
  ASSERT_EQ(plan->split.size(), 4u);
  EXPECT_EQ(plan->split[2], (common::StageBlocks{6, 10})) << plan->summary;
  // The pipeline's share f: (1.27 - 1) x 17/16 / 0.43 = 0.667 of 320 ms, 17 slots of 12.55 ms;
  // the healthy groups' 18 slots plus the fixed 106.7 ms: 332.6 ms.
  EXPECT_NEAR(absl::ToDoubleMilliseconds(plan->predicted), 320 + 0.667 * 320 / 17, 0.5);
}

// The ceiling each plan carries: on the same model as its plan, calibrated to the measured
// healthy iteration time.
TEST(PlannerTest, PlansCarryTheirRecoverableCeiling) {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMPUTE;
  c.ranks = {2};
  c.measured_stage_slowdown = 1.5;
  absl::StatusOr<S2Plan> s2 = PlanS2(Shape(64), c, absl::Milliseconds(170));
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(s2->ceiling.has_value());
  EXPECT_EQ(s2->ceiling->strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(s2->ceiling->healthy_iteration_time_ns(), 170'000'000);
  EXPECT_EQ(s2->ceiling->slowed_iteration_time_ns(), 250'000'000);
  EXPECT_EQ(s2->ceiling->predicted_iteration_time_ns(), absl::ToInt64Nanoseconds(s2->predicted));
  EXPECT_NEAR(s2->ceiling->recoverable(), 0.75, 0.01);
  EXPECT_EQ(PlanS2L(Shape(64), c, absl::Milliseconds(170)).status().code(),
            absl::StatusCode::kFailedPrecondition);  // No blocks known.

  Culprit link;
  link.cause = falcon::v1::CAUSE_COMMUNICATION;
  link.links = {L(0, 2)};
  link.slowdown_ratio = 1.5;
  absl::StatusOr<S3Plan> s3 = PlanS3(Shape(), link, absl::Milliseconds(100));
  ASSERT_TRUE(s3.ok());
  ASSERT_TRUE(s3->ceiling.has_value());
  EXPECT_EQ(s3->ceiling->strategy(), falcon::v1::STRATEGY_S3_TOPOLOGY);
  EXPECT_EQ(s3->ceiling->healthy_iteration_time_ns(), 100'000'000);
  EXPECT_GT(s3->ceiling->slowed_iteration_time_ns(), 100'000'000);
  EXPECT_LT(s3->ceiling->predicted_iteration_time_ns(), s3->ceiling->slowed_iteration_time_ns());
  EXPECT_GT(s3->ceiling->recoverable(), 0.5);
  EXPECT_LE(s3->ceiling->recoverable(), 1.0 + 1e-9);
}

}  // namespace
}  // namespace falcon::controller::mitigation
