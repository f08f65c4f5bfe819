#include "controller/mitigation/s4_checkpoint_restart.h"

#include "controller/mitigation/fake_event_actions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

class S4CheckpointRestartTest : public ::testing::Test {
 protected:
  S4CheckpointRestartTest() : ctx_(3, "job", Culprit5(), 3, 0.97, 3), s4_("ckpt") {
    ctx_.healthy = absl::Milliseconds(100);
    ctx_.slow = absl::Milliseconds(140);
    ctx_.last_iteration = 150;
    ctx_.layouts = &layouts_;
    ctx_.errors = &errors_;
    step_.strategy = analysis::plan::Strategy::kS4CheckpointRestart;
    step_.iteration = 150;
    step_.reason = "lost 2.00s >= S4 checkpoint-restart cost 2.00s";
  }
  static Culprit Culprit5() {
    Culprit c;
    c.cause = falcon::v1::CAUSE_COMPUTE;
    c.ranks = {5};
    return c;
  }
  void PlanAndIssue() {
    absl::StatusOr<PlannedDirective> plan = s4_.Plan(step_, ctx_, actions_);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(s4_.Issue(step_, *plan, ctx_, actions_).ok());
  }
  falcon::v1::DirectiveRecord Record(falcon::v1::DirectiveRecord::State state) {
    falcon::v1::DirectiveRecord r = actions_.directives.at(0);
    r.set_state(state);
    r.set_state_reason("rank 3: no space left");
    return r;
  }

  FakeEventActions actions_;
  CountingErrorCounter errors_;
  LayoutsInForce layouts_;
  EventContext ctx_;
  analysis::plan::EscalationStep step_;
  S4CheckpointRestart s4_;
};

TEST_F(S4CheckpointRestartTest, RestartsWithoutTheCulpritAndAppliedClosesTheEvent) {
  layouts_["job"] = analysis::plan::Layout();  // An S3 layout in force is superseded.
  absl::StatusOr<PlannedDirective> plan = s4_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->directive.checkpoint_restart().checkpoint_dir(), "ckpt");
  EXPECT_EQ(std::vector<uint32_t>(plan->directive.checkpoint_restart().excluded_ranks().begin(),
                                  plan->directive.checkpoint_restart().excluded_ranks().end()),
            std::vector<uint32_t>{5});
  EXPECT_EQ(plan->directive.reason(), step_.reason + "; restart without ranks [5]");
  EXPECT_FALSE(plan->rollback.has_value());
  ASSERT_TRUE(s4_.Issue(step_, *plan, ctx_, actions_).ok());
  EXPECT_EQ(s4_.directive(), 1u);
  EXPECT_TRUE(layouts_.empty());
  EXPECT_EQ(actions_.mitigating, std::vector<std::string>{"S4 checkpoint-restart (directive 1)"});
  // A restart is not undone.
  s4_.Revert(step_, ctx_, actions_);
  EXPECT_EQ(actions_.directives.size(), 1u);
  EXPECT_TRUE(
      s4_.OnDirectiveState(Record(falcon::v1::DirectiveRecord::STATE_APPLIED), ctx_, actions_));
  EXPECT_EQ(actions_.closed,
            std::vector<std::string>{"restarted without ranks [5] (S4, directive 1)"});
}

TEST_F(S4CheckpointRestartTest, NoCulpritToLeaveOutIsRefused) {
  ctx_.culprit.cause = falcon::v1::CAUSE_UNKNOWN;
  ctx_.culprit.ranks = {0, 1, 4, 5};  // The ranks whose series slowed: not culprits.
  absl::StatusOr<PlannedDirective> plan = s4_.Plan(step_, ctx_, actions_);
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.status())) << plan.status();
  EXPECT_THAT(std::string(plan.status().message()), testing::HasSubstr("no culprit to leave out"));
  EXPECT_TRUE(actions_.directives.empty());
}

TEST_F(S4CheckpointRestartTest, TimedOutAlsoClosesRejectedIsRecorded) {
  PlanAndIssue();
  EXPECT_TRUE(
      s4_.OnDirectiveState(Record(falcon::v1::DirectiveRecord::STATE_TIMED_OUT), ctx_, actions_));
  EXPECT_EQ(actions_.closed.size(), 1u);

  S4CheckpointRestart again("ckpt");
  EXPECT_FALSE(
      again.OnDirectiveState(Record(falcon::v1::DirectiveRecord::STATE_REJECTED), ctx_, actions_));
  EXPECT_EQ(again.directive(), 0u);
  const falcon::v1::Action& a = actions_.actions.back();
  EXPECT_EQ(a.strategy(), falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART);
  EXPECT_EQ(a.reason(), "S4 directive 1 failed: rank 3: no space left");
  EXPECT_EQ(a.iteration(), 150);
}

TEST_F(S4CheckpointRestartTest, ACloseTheStoreRefusesIsCounted) {
  PlanAndIssue();
  actions_.fail = absl::UnavailableError("store down");
  EXPECT_TRUE(
      s4_.OnDirectiveState(Record(falcon::v1::DirectiveRecord::STATE_APPLIED), ctx_, actions_));
  EXPECT_EQ(errors_.counts["mitigation_close_event"], 1);
}

}  // namespace
}  // namespace falcon::controller::mitigation
