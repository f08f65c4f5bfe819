#include "controller/mitigation/s2l_layer_split.h"

#include <numeric>
#include <optional>

#include "common/layer_split.h"
#include "common/testing/log_capture.h"
#include "controller/mitigation/fake_event_actions.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

// The demo's compute fault: DP=4 x PP=2, 16 blocks (8 + 8 per pipeline), M = 64; rank 2 (dp 2,
// stage 0) computes x1.5. 1 MB of state per block.
class S2LLayerSplitTest : public ::testing::Test {
 protected:
  S2LLayerSplitTest()
      : actions_(4, 2, 64, 16, 1'000'000), ctx_(7, "job", ComputeCulprit(), 3, 0.97, 3) {
    ctx_.healthy = absl::Milliseconds(170);  // (16 + 1) x 10 ms per stage.
    ctx_.slow = absl::Milliseconds(250);     // 8 + 16 x 15 ms: the x1.5 stage paces dp 2.
    ctx_.layouts = &layouts_;
    ctx_.s2l_measurements = &measurements_;
    ctx_.errors = &errors_;
    step_.strategy = analysis::plan::Strategy::kS2LLayerSplit;
    step_.iteration = 100;
    step_.reason = "lost 2.00s >= S2L layer split cost 1.03s";
  }
  static Culprit ComputeCulprit() {
    Culprit c;
    c.cause = falcon::v1::CAUSE_COMPUTE;
    c.ranks = {2};
    c.slowdown_ratio = 250.0 / 170.0;
    c.measured_stage_slowdown = 1.5;  // As the compute probe measured it.
    return c;
  }
  static std::vector<uint32_t> Values(const google::protobuf::RepeatedField<uint32_t>& v) {
    return std::vector<uint32_t>(v.begin(), v.end());
  }
  // Plans `s` at `step`, issues it and records its directive (the newest) APPLIED as the job's
  // plan in force; the plan, or nullopt (and a failure) when it could not.
  std::optional<PlannedDirective> IssueApplied(MitigationStrategy& s,
                                               const analysis::plan::EscalationStep& step) {
    absl::StatusOr<PlannedDirective> plan = s.Plan(step, ctx_, actions_);
    if (!plan.ok()) {
      ADD_FAILURE() << plan.status();
      return std::nullopt;
    }
    if (absl::Status issued = s.Issue(step, *plan, ctx_, actions_); !issued.ok()) {
      ADD_FAILURE() << issued;
      return std::nullopt;
    }
    falcon::v1::DirectiveRecord applied = actions_.directives.back();
    applied.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
    RecordPlanInForce(applied, actions_, errors_);
    return *plan;
  }

  FakeEventActions actions_;
  CountingErrorCounter errors_;
  LayoutsInForce layouts_;
  S2LMeasurements measurements_;
  EventContext ctx_;
  analysis::plan::EscalationStep step_;
  S2MicroBatch s2_;
  S2LLayerSplit s2l_{&s2_};
};

TEST_F(S2LLayerSplitTest, SplitsTheSlowPipelineAndRebalancesItsMicroBatches) {
  EXPECT_EQ(s2l_.level(), analysis::plan::Strategy::kS2LLayerSplit);
  common::testing::LogCapture log;
  absl::StatusOr<PlannedDirective> plan = s2l_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->directive.has_layer_split());
  const falcon::v1::LayerSplit& split = plan->directive.layer_split();
  EXPECT_TRUE(common::ValidateLayerSplit(split, 4, 2, 16, 64).ok());
  const std::vector<common::StageBlocks> blocks = common::StageBlocksOf(split);
  // The slow stage (dp 2, stage 0) gives blocks to its pipeline peer; the others stay even.
  EXPECT_EQ(blocks[2], (common::StageBlocks{6, 10}));
  for (int d : {0, 1, 3}) EXPECT_EQ(blocks[d], (common::StageBlocks{8, 8})) << d;
  // The slow pipeline now runs at 10/8 of a healthy one: it takes fewer micro-batches, in counts
  // that need not be multiples of PP.
  const std::vector<uint32_t> m = Values(split.micro_batches());
  EXPECT_EQ(std::accumulate(m.begin(), m.end(), 0u), 64u);
  EXPECT_EQ(m, (std::vector<uint32_t>{17, 17, 13, 17}));
  EXPECT_NE(plan->summary.find("split dp2 6+10 (was even)"), std::string::npos) << plan->summary;
  EXPECT_NE(plan->summary.find("2 blocks move (2000000 bytes)"), std::string::npos)
      << plan->summary;
  EXPECT_EQ(plan->directive.reason().rfind(step_.reason + "; ", 0), 0u);
  EXPECT_EQ(plan->directive.plan_version(), 1);
  EXPECT_EQ(log.Matching("S2L plan computed job=job event=7 rank=2").size(), 1u);
  // The ceiling: healthy 170 ms, slowed 250 ms, predicted under the plan; at least 0.85 of the
  // slowdown recoverable with M = 64 (S2 alone, in multiples of PP, gets 0.75).
  ASSERT_TRUE(plan->ceiling.has_value());
  EXPECT_EQ(plan->ceiling->strategy(), falcon::v1::STRATEGY_S2L_LAYER_SPLIT);
  EXPECT_EQ(plan->ceiling->healthy_iteration_time_ns(), 170'000'000);
  EXPECT_EQ(plan->ceiling->slowed_iteration_time_ns(), 250'000'000);
  EXPECT_GE(plan->ceiling->recoverable(), 0.85);
  EXPECT_LE(plan->ceiling->predicted_iteration_time_ns(), 180'000'000);  // 0.875.
  // The rollback restores the split and micro-batches in force.
  ASSERT_TRUE(plan->rollback.has_value());
  ASSERT_TRUE(plan->rollback->has_layer_split());
  EXPECT_TRUE(common::IsEvenSplit(common::StageBlocksOf(plan->rollback->layer_split()), 16));
  EXPECT_EQ(Values(plan->rollback->layer_split().micro_batches()),
            (std::vector<uint32_t>{16, 16, 16, 16}));

  ASSERT_TRUE(s2l_.Issue(step_, *plan, ctx_, actions_).ok());
  EXPECT_EQ(s2l_.directive(), 1u);
  ASSERT_TRUE(s2l_.ceiling().has_value());
  EXPECT_EQ(actions_.mitigating, std::vector<std::string>{"S2L layer split (directive 1)"});
  ASSERT_EQ(actions_.actions.size(), 1u);
  EXPECT_EQ(actions_.actions[0].strategy(), falcon::v1::STRATEGY_S2L_LAYER_SPLIT);
  EXPECT_EQ(ctx_.measurement.from(), 103);
  EXPECT_EQ(s2l_.micro_batches_before(), (std::vector<uint32_t>{16, 16, 16, 16}));

  // APPLIED: the job shows the split and the micro-batches in force.
  falcon::v1::DirectiveRecord applied = actions_.directives[0];
  applied.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
  RecordPlanInForce(applied, actions_, errors_);
  const falcon::v1::Job& job = actions_.job->job();
  EXPECT_EQ(job.plan_version(), 1);
  EXPECT_EQ(Values(job.micro_batches()), m);
  ASSERT_EQ(job.layer_split_size(), 4);
  EXPECT_EQ(Values(job.layer_split(2).stage_blocks()), (std::vector<uint32_t>{6, 10}));
  // ... which the planners read back with the registered pipeline.
  absl::StatusOr<JobShape> shape = ShapeOf(*actions_.job, nullptr, {});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->pipeline_blocks, 16);
  EXPECT_EQ(shape->block_state_bytes, 1'000'000);
  EXPECT_EQ(shape->layer_split, blocks);

  // The revert restores the even split and the micro-batches in force before it.
  step_.action = analysis::plan::EscalationStep::Action::kRevert;
  step_.reason = "event cleared at iteration 180: revert S2L layer split";
  s2l_.Revert(step_, ctx_, actions_);
  EXPECT_EQ(s2l_.directive(), 0u);
  EXPECT_FALSE(s2l_.ceiling().has_value());
  ASSERT_EQ(actions_.directives.size(), 2u);
  const falcon::v1::Directive& revert = actions_.directives[1].directive();
  EXPECT_EQ(revert.reverts_directive_id(), 1u);
  ASSERT_TRUE(revert.has_layer_split());
  EXPECT_TRUE(common::IsEvenSplit(common::StageBlocksOf(revert.layer_split()), 16));
  EXPECT_EQ(Values(revert.layer_split().micro_batches()), (std::vector<uint32_t>{16, 16, 16, 16}));
  EXPECT_NE(revert.reason().find("layer split back to even, micro-batches [16, 16, 16, 16]"),
            std::string::npos)
      << revert.reason();
  EXPECT_TRUE(actions_.actions.back().revert());
  // Applied, the even split clears the job's split.
  falcon::v1::DirectiveRecord reverted = actions_.directives[1];
  reverted.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
  RecordPlanInForce(reverted, actions_, errors_);
  EXPECT_EQ(actions_.job->job().layer_split_size(), 0);
  EXPECT_EQ(Values(actions_.job->job().micro_batches()), (std::vector<uint32_t>{16, 16, 16, 16}));
  EXPECT_TRUE(errors_.counts.empty());
}

// Over S2 in force: S2L plans from what S2 replaced, and its revert puts S2's plan back.
TEST_F(S2LLayerSplitTest, OverS2ItsRevertRestoresS2sPlan) {
  analysis::plan::EscalationStep s2_step = step_;
  s2_step.strategy = analysis::plan::Strategy::kS2MicroBatch;
  const std::optional<PlannedDirective> s2_plan = IssueApplied(s2_, s2_step);
  ASSERT_TRUE(s2_plan.has_value());
  const std::vector<uint32_t> s2_m = Values(actions_.job->job().micro_batches());
  ASSERT_NE(s2_m, (std::vector<uint32_t>{16, 16, 16, 16}));
  // S2's own ceiling (the even split, its micro-batches in multiples of PP): below S2L's.
  ASSERT_TRUE(s2_plan->ceiling.has_value());
  EXPECT_EQ(s2_plan->ceiling->strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_NEAR(s2_plan->ceiling->recoverable(), 0.75, 0.01);

  absl::StatusOr<PlannedDirective> plan = s2l_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NE(plan->summary.find("(was [16, 16, 16, 16])"), std::string::npos) << plan->summary;
  EXPECT_GT(plan->ceiling->recoverable(), s2_plan->ceiling->recoverable());
  EXPECT_EQ(Values(plan->rollback->layer_split().micro_batches()), s2_m);
  ASSERT_TRUE(s2l_.Issue(step_, *plan, ctx_, actions_).ok());
  s2l_.Revert(step_, ctx_, actions_);
  ASSERT_EQ(actions_.directives.size(), 3u);
  EXPECT_EQ(Values(actions_.directives[2].directive().layer_split().micro_batches()), s2_m);
}

// S4 restarts the job on fewer DP groups, which the trainer runs even: once its directive is
// APPLIED, the job shows neither the split nor the micro-batch plan of the old shape.
TEST_F(S2LLayerSplitTest, AnAppliedCheckpointRestartClearsTheSplitInForce) {
  ASSERT_TRUE(IssueApplied(s2l_, step_).has_value());
  ASSERT_EQ(actions_.job->job().layer_split_size(), 4);

  falcon::v1::DirectiveRecord restart;
  restart.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
  restart.mutable_directive()->set_job("job");
  restart.mutable_directive()->set_directive_id(2);
  restart.mutable_directive()->set_plan_version(2);
  restart.mutable_directive()->mutable_checkpoint_restart()->add_excluded_ranks(2);
  RecordPlanInForce(restart, actions_, errors_);
  const falcon::v1::Job& job = actions_.job->job();
  EXPECT_EQ(job.plan_version(), 2);
  EXPECT_EQ(job.layer_split_size(), 0);
  EXPECT_EQ(job.micro_batches_size(), 0);
  // The planners read the even split and micro-batches back.
  absl::StatusOr<JobShape> shape = ShapeOf(*actions_.job, nullptr, {});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_TRUE(shape->layer_split.empty());
  EXPECT_EQ(shape->micro_batches, (std::vector<uint32_t>{16, 16, 16, 16}));
  EXPECT_TRUE(errors_.counts.empty());
}

TEST_F(S2LLayerSplitTest, NotApplicableWithoutBlocksToMoveOrGain) {
  // A job whose trainer registered no block count: nothing to re-split.
  FakeEventActions flat(4, 2, 64);
  absl::StatusOr<PlannedDirective> plan = s2l_.Plan(step_, ctx_, flat);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("cannot be re-split (pp 2, blocks unknown)"),
            std::string::npos)
      << plan.status();
  // As many blocks as stages: none can move.
  FakeEventActions two(4, 2, 64, 2, 1);
  EXPECT_NE(s2l_.Plan(step_, ctx_, two)
                .status()
                .message()
                .find("cannot be re-split (pp 2, 2 "
                      "blocks)"),
            std::string::npos);
  // A slowdown too small for a block to move.
  ctx_.culprit.measured_stage_slowdown = 1.04;
  plan = s2l_.Plan(step_, ctx_, actions_);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("no block would move: ", 0), 0u) << plan.status();
  // A link: not S2L's.
  ctx_.culprit.cause = falcon::v1::CAUSE_COMMUNICATION;
  EXPECT_EQ(s2l_.Plan(step_, ctx_, actions_).status().message(),
            "S2L helps compute fail-slows only");
  EXPECT_TRUE(actions_.directives.empty());
}

TEST_F(S2LLayerSplitTest, CostInputsNameTheBytesItsPlanMovesAndTheMeasuredPause) {
  analysis::plan::EscalationOptions o;
  s2l_.CostInputs(ctx_, actions_, &o);
  EXPECT_TRUE(o.s2l_resplittable);
  EXPECT_EQ(o.s2l_bytes_moved, 2'000'000);  // Two blocks of 1 MB.
  EXPECT_FALSE(o.s2l_measured.has_value());
  measurements_["job"] = S2LMeasured{{absl::Milliseconds(350), 5e8}, 1};
  s2l_.CostInputs(ctx_, actions_, &o);
  EXPECT_EQ(o.s2l_measured, (analysis::plan::S2LMeasurement{absl::Milliseconds(350), 5e8}));
  // No blocks known: not a candidate.
  FakeEventActions flat(4, 2, 64);
  S2LLayerSplit other(nullptr);
  analysis::plan::EscalationOptions none;
  none.s2l_resplittable = true;  // Stale values CostInputs must overwrite.
  none.s2l_bytes_moved = 123;
  other.CostInputs(ctx_, flat, &none);
  EXPECT_FALSE(none.s2l_resplittable);
  EXPECT_EQ(none.s2l_bytes_moved, 0);
}

TEST(AckNumberTest, ReadsTheLastFigureOfAKeyInAnAckReason) {
  EXPECT_EQ(*AckNumber("remapped; moved 2; pause_s=0.125000", "pause_s", 1e6), 0.125);
  EXPECT_EQ(*AckNumber("pause_s=1 then pause_s=2", "pause_s", 1e6), 2.0);
  EXPECT_EQ(*AckNumber("bytes_moved=100; move_s=0.5; pause_s=1", "move_s", 1e6), 0.5);
  EXPECT_EQ(*AckNumber("bytes_moved=100; move_s=0.5; pause_s=1", "bytes_moved", 1e18), 100.0);
  EXPECT_EQ(*AckNumber("applied", "pause_s", 1e6), std::nullopt);
  // A longer key that ends in the one asked for is not it.
  EXPECT_EQ(*AckNumber("xmove_s=3", "move_s", 1e6), std::nullopt);
  EXPECT_EQ(*AckNumber("x.move_s=3; y-move_s=4", "move_s", 1e6), std::nullopt);
  EXPECT_EQ(*AckNumber("pause_s= 5", "pause_s", 1e6), 5.0);  // Blanks before the value.
  EXPECT_EQ(*AckNumber("move_s=2; xmove_s=3", "move_s", 1e6), 2.0);
  for (const char* bad : {"pause_s=", "pause_s=-1", "pause_s=nan", "pause_s=2e6", "pause_s=1s",
                          "pause_s=inf; done"}) {
    absl::StatusOr<std::optional<double>> p = AckNumber(bad, "pause_s", 1e6);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("pause_s: '"), std::string::npos) << p.status();
  }
}

// The slowest rank's pause less its own move; the plan's bytes over the longest move.
TEST(S2LMeasurementOfTest, TakesTheSlowestPauseBesideItsMoveAndTheMovesRate) {
  falcon::v1::DirectiveRecord r;
  auto ack = [&](uint32_t rank, falcon::v1::AckStatus status, const std::string& reason) {
    falcon::v1::DirectiveAck* a = r.add_acks();
    a->set_rank(rank);
    a->set_status(status);
    a->set_reason(reason);
  };
  std::vector<absl::Status> bad;
  EXPECT_EQ(S2LMeasurementOf(r, &bad), std::nullopt);
  ack(0, falcon::v1::ACK_STATUS_APPLIED, "bytes_moved=1000; move_s=0.010; pause_s=0.030");
  ack(1, falcon::v1::ACK_STATUS_APPLIED, "bytes_moved=1000; move_s=0.020; pause_s=0.025");
  ack(2, falcon::v1::ACK_STATUS_RECEIVED, "queued; pause_s=9");  // Not an APPLIED ack.
  ack(3, falcon::v1::ACK_STATUS_APPLIED, "bytes_moved=1000; move_s=oops; pause_s=5");
  std::optional<analysis::plan::S2LMeasurement> m = S2LMeasurementOf(r, &bad);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->pause, absl::Milliseconds(20));
  ASSERT_TRUE(m->bandwidth_bytes_per_s.has_value());
  EXPECT_DOUBLE_EQ(*m->bandwidth_bytes_per_s, 1000 / 0.020);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].message(), "rank 3: move_s: 'oops' is not a number in [0, 1e+06]");
  // Of equal pauses, the one with the most beside its move, whatever the acks' order.
  for (bool reversed : {false, true}) {
    falcon::v1::DirectiveRecord tie;
    const char* reasons[] = {"move_s=0.5; pause_s=2", "move_s=1.5; pause_s=2"};
    for (int i = 0; i < 2; ++i) {
      falcon::v1::DirectiveAck* a = tie.add_acks();
      a->set_rank(i);
      a->set_status(falcon::v1::ACK_STATUS_APPLIED);
      a->set_reason(reasons[reversed ? 1 - i : i]);
    }
    m = S2LMeasurementOf(tie, nullptr);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->pause, absl::Milliseconds(1500)) << reversed;
  }
  // A move reported longer than its pause is cut to it, and said.
  falcon::v1::DirectiveRecord odd;
  falcon::v1::DirectiveAck* o = odd.add_acks();
  o->set_rank(5);
  o->set_status(falcon::v1::ACK_STATUS_APPLIED);
  o->set_reason("bytes_moved=2000; move_s=2; pause_s=1");
  bad.clear();
  m = S2LMeasurementOf(odd, &bad);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->pause, absl::ZeroDuration());
  EXPECT_DOUBLE_EQ(*m->bandwidth_bytes_per_s, 2000.0);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].message(), "rank 5: move_s 2 exceeds pause_s 1 (counted as the whole pause)");
  // An older trainer reports the pause alone: all of it counts, and no rate is known.
  falcon::v1::DirectiveRecord old;
  falcon::v1::DirectiveAck* a = old.add_acks();
  a->set_status(falcon::v1::ACK_STATUS_APPLIED);
  a->set_reason("layer split dp2 6+10; moved 2 block copies (100 bytes); pause_s=0.5");
  m = S2LMeasurementOf(old, nullptr);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->pause, absl::Milliseconds(500));
  EXPECT_FALSE(m->bandwidth_bytes_per_s.has_value());
}

}  // namespace
}  // namespace falcon::controller::mitigation
