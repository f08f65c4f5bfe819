#include "controller/mitigation/s2_micro_batch.h"

#include <numeric>

#include "common/testing/log_capture.h"
#include "controller/mitigation/fake_event_actions.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

class S2MicroBatchTest : public ::testing::Test {
 protected:
  S2MicroBatchTest() : ctx_(7, "job", ComputeCulprit(), 3, 0.97, 3) {
    ctx_.healthy = absl::Milliseconds(100);
    ctx_.slow = absl::Milliseconds(140);
    ctx_.layouts = &layouts_;
    ctx_.errors = &errors_;
    step_.strategy = analysis::plan::Strategy::kS2MicroBatch;
    step_.iteration = 100;
    step_.reason = "lost 0.20s >= S2 micro-batch cost 0.20s";
  }
  static Culprit ComputeCulprit() {
    Culprit c;
    c.cause = falcon::v1::CAUSE_COMPUTE;
    c.ranks = {5};
    c.slowdown_ratio = 1.4;
    return c;
  }
  void PlanAndIssue() {
    absl::StatusOr<PlannedDirective> plan = s2_.Plan(step_, ctx_, actions_);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(s2_.Issue(step_, *plan, ctx_, actions_).ok());
  }

  FakeEventActions actions_;
  CountingErrorCounter errors_;
  LayoutsInForce layouts_;
  EventContext ctx_;
  analysis::plan::EscalationStep step_;
  S2MicroBatch s2_;
};

TEST_F(S2MicroBatchTest, PlansIssuesAndRevertsToThePlanBefore) {
  EXPECT_EQ(s2_.level(), analysis::plan::Strategy::kS2MicroBatch);
  common::testing::LogCapture log;
  absl::StatusOr<PlannedDirective> plan = s2_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& m = plan->directive.micro_batch_plan().micro_batches();
  EXPECT_EQ(std::accumulate(m.begin(), m.end(), 0u), 32u);
  EXPECT_LT(m[1], 8u);  // Rank 5's DP group runs fewer.
  EXPECT_EQ(plan->directive.plan_version(), 1);
  EXPECT_EQ(plan->directive.reason().rfind(step_.reason + "; ", 0), 0u);
  ASSERT_TRUE(plan->rollback.has_value());
  EXPECT_EQ(plan->rollback->micro_batch_plan().micro_batches_size(), 4);
  EXPECT_EQ(s2_.directive(), 0u);  // Planned, not issued.
  // The log names the stage slowdown the plan is sized for, as the plan's summary does (no probe
  // reading yet: derived from the job's slowdown).
  const std::vector<std::string> computed = log.Matching("S2 plan computed job=job event=7 rank=5");
  ASSERT_EQ(computed.size(), 1u);
  EXPECT_NE(computed[0].find(" stage_slowdown=1.45 stage_slowdown_from=job_ratio "),
            std::string::npos)
      << computed[0];
  EXPECT_NE(plan->summary.find("culprit stage slowdown x1.45"), std::string::npos) << plan->summary;

  ASSERT_TRUE(s2_.Issue(step_, *plan, ctx_, actions_).ok());
  EXPECT_EQ(s2_.directive(), 1u);
  ASSERT_EQ(actions_.directives.size(), 1u);
  ASSERT_EQ(actions_.rollbacks.size(), 1u);
  EXPECT_EQ(actions_.mitigating, std::vector<std::string>{"S2 micro-batch plan (directive 1)"});
  ASSERT_EQ(actions_.actions.size(), 1u);
  EXPECT_EQ(actions_.actions[0].strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(actions_.actions[0].directive_id(), 1u);
  EXPECT_EQ(actions_.actions[0].iteration(), 103);  // The directive's effective iteration.
  EXPECT_FALSE(actions_.actions[0].dry_run());
  EXPECT_EQ(ctx_.measurement.from(), 103);
  EXPECT_EQ(s2_.before(), (std::vector<uint32_t>{8, 8, 8, 8}));

  step_.action = analysis::plan::EscalationStep::Action::kRevert;
  step_.reason = "event cleared at iteration 180: revert S2 micro-batch";
  s2_.Revert(step_, ctx_, actions_);
  EXPECT_EQ(s2_.directive(), 0u);
  ASSERT_EQ(actions_.directives.size(), 2u);
  const falcon::v1::Directive& revert = actions_.directives[1].directive();
  EXPECT_EQ(revert.reverts_directive_id(), 1u);
  EXPECT_EQ(std::vector<uint32_t>(revert.micro_batch_plan().micro_batches().begin(),
                                  revert.micro_batch_plan().micro_batches().end()),
            (std::vector<uint32_t>{8, 8, 8, 8}));
  EXPECT_NE(revert.reason().find("micro-batches back to [8, 8, 8, 8]"), std::string::npos);
  EXPECT_TRUE(actions_.actions.back().revert());
  s2_.Revert(step_, ctx_, actions_);  // Nothing in force: nothing issued.
  EXPECT_EQ(actions_.directives.size(), 2u);
  EXPECT_TRUE(errors_.counts.empty());
}

TEST_F(S2MicroBatchTest, CannotHelpALinkAnUnknownJobOrATightSplit) {
  ctx_.culprit.cause = falcon::v1::CAUSE_COMMUNICATION;
  EXPECT_EQ(s2_.Plan(step_, ctx_, actions_).status().message(), "S2 helps compute fail-slows only");
  ctx_.culprit.cause = falcon::v1::CAUSE_COMPUTE;
  actions_.job_known = false;
  EXPECT_EQ(s2_.Plan(step_, ctx_, actions_).status().message(), "job unknown");
  FakeEventActions tight(4, 2, 8);  // Every group needs >= PP micro-batches: nothing to move.
  absl::StatusOr<PlannedDirective> plan = s2_.Plan(step_, ctx_, tight);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("no better micro-batch plan"), std::string::npos);
}

TEST_F(S2MicroBatchTest, DryRunRecordsThePlanAndItsRevertWithoutSending) {
  actions_.settings.dry_run = true;
  PlanAndIssue();
  EXPECT_EQ(s2_.directive(), 0u);
  EXPECT_TRUE(actions_.directives.empty());
  ASSERT_EQ(actions_.actions.size(), 1u);
  EXPECT_TRUE(actions_.actions[0].dry_run());
  EXPECT_EQ(actions_.actions[0].iteration(), 103);
  s2_.Revert(step_, ctx_, actions_);
  ASSERT_EQ(actions_.actions.size(), 2u);
  EXPECT_TRUE(actions_.actions[1].dry_run() && actions_.actions[1].revert());
  s2_.Revert(step_, ctx_, actions_);  // Once.
  EXPECT_EQ(actions_.actions.size(), 2u);
}

TEST_F(S2MicroBatchTest, MeasuresUnderThePlanAndSaysWhenItDidNotHelp) {
  PlanAndIssue();
  EXPECT_FALSE(s2_.Measure(103, absl::Milliseconds(141), ctx_, actions_).has_value());
  EXPECT_FALSE(s2_.Measure(104, absl::Milliseconds(141), ctx_, actions_).has_value());
  EXPECT_FALSE(s2_.Measure(105, absl::Milliseconds(141), ctx_, actions_).has_value());
  // No faster than slow: judged on the first window.
  const std::optional<std::string> why = s2_.Measure(106, absl::Milliseconds(141), ctx_, actions_);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "measured 0.141 s under the plan (median of 3 iterations) vs slow 0.140 s: it did not "
            "help");
  EXPECT_EQ(actions_.mitigated_times.size(), 3u);
}

TEST_F(S2MicroBatchTest, APlanWithinTheNoiseOfSlowIsMeasuredLonger) {
  PlanAndIssue();
  // 139 ms: faster than the slow 140 ms, not by 3%. Judged again over 3 windows of 3.
  int64_t iteration = 103;
  for (; iteration <= 111; ++iteration) {
    EXPECT_FALSE(s2_.Measure(iteration, absl::Milliseconds(139), ctx_, actions_).has_value())
        << "iteration " << iteration;
  }
  std::optional<std::string> why = s2_.Measure(iteration, absl::Milliseconds(139), ctx_, actions_);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "measured 0.139 s under the plan (median of 9 iterations) vs slow 0.140 s: it did not "
            "help");
}

TEST_F(S2MicroBatchTest, APlanThatHelpsOverTheLongerWindowIsKept) {
  PlanAndIssue();
  common::testing::LogCapture log;
  // The first window (104-106) within the noise of slow, the next 6 iterations clearly faster.
  for (int64_t iteration = 104; iteration <= 112; ++iteration) {
    const absl::Duration t = absl::Milliseconds(iteration <= 106 ? 139 : 120);
    EXPECT_FALSE(s2_.Measure(iteration, t, ctx_, actions_).has_value())
        << "iteration " << iteration;
  }
  EXPECT_EQ(actions_.mitigated_times.back(), absl::Milliseconds(120));
  EXPECT_EQ(log.Matching("plan measured longer").size(), 1u);
  ASSERT_EQ(log.Matching("plan kept").size(), 1u);
  EXPECT_NE(log.Matching("plan kept")[0].find("(median of 9 iterations)"), std::string::npos);
}

TEST_F(S2MicroBatchTest, RejectedDirectiveDropsThePlanAndFailedCallsAreCounted) {
  PlanAndIssue();
  falcon::v1::DirectiveRecord rec = actions_.directives[0];
  rec.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
  EXPECT_FALSE(s2_.OnDirectiveState(rec, ctx_, actions_));
  EXPECT_EQ(s2_.directive(), 1u);
  rec.set_state(falcon::v1::DirectiveRecord::STATE_REJECTED);
  EXPECT_FALSE(s2_.OnDirectiveState(rec, ctx_, actions_));
  EXPECT_EQ(s2_.directive(), 0u);

  // The store refuses everything: Issue fails; a revert that cannot be sent is counted.
  S2MicroBatch other;
  absl::StatusOr<PlannedDirective> plan = other.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok());
  actions_.fail = absl::UnavailableError("store down");
  EXPECT_EQ(other.Issue(step_, *plan, ctx_, actions_).code(), absl::StatusCode::kUnavailable);
  JobShape shape;
  shape.micro_batches = {8, 8, 8, 8};
  other.Restore(9, &shape);
  EXPECT_EQ(other.directive(), 9u);
  other.Revert(step_, ctx_, actions_);
  EXPECT_EQ(other.directive(), 9u);  // Still in force: the next revert step tries again.
  EXPECT_EQ(errors_.counts["mitigation_revert_directive"], 1);
  ctx_.Record(actions_, falcon::v1::STRATEGY_S1_IGNORE, 0, 1, "x", false);
  EXPECT_EQ(errors_.counts["mitigation_record_action"], 1);
}

}  // namespace
}  // namespace falcon::controller::mitigation
