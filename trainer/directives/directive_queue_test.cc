#include "trainer/directives/directive_queue.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;

falcon::v1::Directive Make(uint64_t id, int64_t at) {
  falcon::v1::Directive d;
  d.set_directive_id(id);
  d.set_effective_iteration(at);
  return d;
}

class CheckTest : public ::testing::Test {
 protected:
  CheckTest() : layout_(*analysis::plan::Layout::Default(8, 4, 2)), plan_({2, 2, 2, 2}) {
    state_.layout = &layout_;
    state_.micro_batches = &plan_;
    state_.total_micro_batches = 8;
    state_.num_blocks = 4;
  }
  std::string Why(const falcon::v1::Directive& d) {
    return std::string(CheckDirective(d, state_).message());
  }
  analysis::plan::Layout layout_;
  std::vector<int> plan_;
  PlanState state_;
};

TEST_F(CheckTest, MicroBatchPlans) {
  falcon::v1::Directive d = Make(1, 0);
  for (int m : {4, 2, 2, 0}) d.mutable_micro_batch_plan()->add_micro_batches(m);
  EXPECT_TRUE(CheckDirective(d, state_).ok());
  d.mutable_micro_batch_plan()->set_micro_batches(3, 1);
  EXPECT_THAT(Why(d), HasSubstr("micro_batches[3] = 1"));
}

TEST_F(CheckTest, TopologyChanges) {
  falcon::v1::Directive d = Make(1, 0);
  for (int r = 0; r < 8; ++r) {
    falcon::v1::RankAssignment* a = d.mutable_topology_change()->add_assignments();
    a->set_rank(r);
    a->set_dp_index(r / 4);  // DP=2 x PP=4
    a->set_pp_index(r % 4);
  }
  state_.num_blocks = 4;
  EXPECT_TRUE(CheckDirective(d, state_).ok());
  state_.num_blocks = 3;
  EXPECT_THAT(Why(d), HasSubstr("exceeds the 3 blocks"));
  state_.num_blocks = 4;
  state_.total_micro_batches = 6;
  EXPECT_THAT(Why(d), HasSubstr("does not divide the 6 micro-batches"));
}

TEST_F(CheckTest, LayerSplits) {
  // DP=4 x PP=2 of 4 blocks, M = 8.
  falcon::v1::Directive d = Make(1, 0);
  falcon::v1::LayerSplit* split = d.mutable_layer_split();
  for (int dp = 0; dp < 4; ++dp) {
    falcon::v1::ReplicaSplit* r = split->add_replicas();
    r->add_stage_blocks(dp == 2 ? 1 : 2);
    r->add_stage_blocks(dp == 2 ? 3 : 2);
  }
  for (int m : {3, 3, 1, 1}) split->add_micro_batches(m);  // Not multiples of PP: fine.
  EXPECT_TRUE(CheckDirective(d, state_).ok()) << CheckDirective(d, state_);
  falcon::v1::Directive bad = d;
  bad.mutable_layer_split()->mutable_replicas(2)->set_stage_blocks(1, 4);  // 1 + 4 blocks of 4.
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.replicas[2].stage_blocks sum to 5"));
  bad = d;
  bad.mutable_layer_split()->mutable_replicas(1)->add_stage_blocks(1);  // Three stages of two.
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.replicas[1].stage_blocks: 3 entries for 2 stages"));
  bad = d;
  bad.mutable_layer_split()->mutable_replicas(3)->set_stage_blocks(0, 0);
  bad.mutable_layer_split()->mutable_replicas(3)->set_stage_blocks(1, 4);
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.replicas[3].stage_blocks[0] = 0"));
  bad = d;
  bad.mutable_layer_split()->mutable_replicas()->RemoveLast();  // Three pipelines of four.
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.replicas: 3 entries for 4 DP groups"));
  bad = d;
  bad.mutable_layer_split()->set_micro_batches(2, 0);
  bad.mutable_layer_split()->set_micro_batches(3, 2);
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.micro_batches[2] = 0"));
  bad = d;
  bad.mutable_layer_split()->set_micro_batches(0, 4);
  EXPECT_THAT(Why(bad), HasSubstr("layer_split.micro_batches sum to 9, not the global 8"));
  state_.num_blocks = 5;  // The model has another block count.
  EXPECT_THAT(Why(d), HasSubstr("sum to 4, not the 5 blocks"));
}

TEST_F(CheckTest, CheckpointRestart) {
  falcon::v1::Directive d = Make(1, 0);
  d.mutable_checkpoint_restart()->add_excluded_ranks(3);
  EXPECT_THAT(Why(d), HasSubstr("checkpoint_dir must not be empty"));
  d.mutable_checkpoint_restart()->set_checkpoint_dir("/tmp/x");
  EXPECT_TRUE(CheckDirective(d, state_).ok());
  d.mutable_checkpoint_restart()->add_excluded_ranks(3);
  EXPECT_THAT(Why(d), HasSubstr("excluded_ranks[1] = 3"));
  falcon::v1::Directive all = Make(2, 0);
  all.mutable_checkpoint_restart()->set_checkpoint_dir("/tmp/x");
  for (int r = 0; r < 7; ++r) all.mutable_checkpoint_restart()->add_excluded_ranks(r);
  EXPECT_THAT(Why(all), HasSubstr("leaving fewer than the 2"));
}

TEST_F(CheckTest, PauseAndResume) {
  falcon::v1::Directive p = Make(1, 0);
  p.mutable_pause()->set_max_duration_ns(0);
  EXPECT_THAT(Why(p), HasSubstr("max_duration_ns = 0"));
  p.mutable_pause()->set_max_duration_ns(1000);
  EXPECT_TRUE(CheckDirective(p, state_).ok());
  falcon::v1::Directive r = Make(2, 0);
  r.mutable_resume();
  EXPECT_EQ(CheckDirective(r, state_).code(), absl::StatusCode::kFailedPrecondition);
  state_.paused = true;
  EXPECT_TRUE(CheckDirective(r, state_).ok());
  EXPECT_THAT(Why(Make(0, 0)), HasSubstr("directive_id"));
}

TEST(DirectiveQueueTest, HoldsUntilDueAppliesOnceAndSkipsProfiling) {
  DirectiveQueue q;
  falcon::v1::Directive later = Make(7, 10);
  later.mutable_resume();
  falcon::v1::Directive now = Make(3, 2);
  now.mutable_pause()->set_max_duration_ns(1);
  falcon::v1::Directive profiling = Make(4, 0);
  profiling.mutable_profiling()->set_enabled(true);
  EXPECT_FALSE(IsTrainerDirective(profiling));
  const auto added = q.Add({later, now, profiling});
  ASSERT_EQ(added.size(), 2u);
  EXPECT_TRUE(q.Add({now}).empty());  // Re-delivery: already queued.
  EXPECT_TRUE(q.PopDue(1).empty());
  auto due = q.PopDue(5);  // Due late: still applied.
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].directive_id(), 3u);
  q.Record(3, {falcon::v1::ACK_STATUS_APPLIED, "ok", 5});
  EXPECT_TRUE(q.Add({now}).empty());  // Done: never queued again.
  ASSERT_NE(q.OutcomeOf(3), nullptr);
  EXPECT_EQ(q.OutcomeOf(3)->applied_iteration, 5);
  EXPECT_EQ(q.OutcomeOf(7), nullptr);
  EXPECT_EQ(q.pending(), 1u);
  EXPECT_EQ(q.PopDue(10).size(), 1u);
}

TEST(DirectiveQueueTest, MarkDeliveredTellsARedeliveryFromTheFirst) {
  DirectiveQueue q;
  EXPECT_TRUE(q.MarkDelivered(3));
  EXPECT_FALSE(q.MarkDelivered(3));
  EXPECT_TRUE(q.MarkDelivered(4));
}

TEST(DirectiveQueueTest, TargetRanks) {
  falcon::v1::Directive d = Make(1, 0);
  EXPECT_TRUE(IsTarget(d, 5));
  d.add_target_ranks(2);
  EXPECT_TRUE(IsTarget(d, 2));
  EXPECT_FALSE(IsTarget(d, 5));
}

falcon::v1::TopologyChange Change(const std::vector<std::vector<int>>& rows) {
  falcon::v1::TopologyChange c;
  for (const auto& r : rows) {
    falcon::v1::RankAssignment* a = c.add_assignments();
    a->set_rank(r[0]);
    a->set_dp_index(r[1]);
    a->set_pp_index(r[2]);
    if (r.size() > 3) a->set_tp_index(r[3]);
  }
  return c;
}

TEST(LayoutFromTopologyChangeTest, TopologyChangeSwapsPositions) {
  // The paper's node swap: ranks 1 and 2 exchange their (dp, pp) positions.
  absl::StatusOr<analysis::plan::Layout> l =
      LayoutFromTopologyChange(Change({{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 1}}), 4);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->dp_size(), 2);
  EXPECT_EQ(l->pp_size(), 2);
  EXPECT_EQ(l->at(1), (analysis::plan::RankPlacement{1, "", 0, 1, 0}));
  EXPECT_EQ(l->RankAt(1, 0, 0), 2);
}

TEST(LayoutFromTopologyChangeTest, MalformedTopologyChangesAreRejected) {
  EXPECT_THAT(std::string(LayoutFromTopologyChange(Change({{0, 0, 0}}), 2).status().message()),
              HasSubstr("1 entries"));
  EXPECT_THAT(
      std::string(LayoutFromTopologyChange(Change({{0, 0, 0}, {0, 1, 0}}), 2).status().message()),
      HasSubstr("assigned twice"));
  EXPECT_THAT(
      std::string(LayoutFromTopologyChange(Change({{0, 0, 0}, {1, 0, 0}}), 2).status().message()),
      HasSubstr("share position"));
  EXPECT_THAT(
      std::string(
          LayoutFromTopologyChange(Change({{0, 0, 0}, {1, 1, 0, 1}}), 2).status().message()),
      HasSubstr("tp_index"));
  // (0,0), (1,1), (2,2): not a full grid.
  EXPECT_FALSE(LayoutFromTopologyChange(Change({{0, 0, 0}, {1, 1, 1}, {2, 2, 2}}), 3).ok());
}

}  // namespace
}  // namespace falcon::trainer::directives
