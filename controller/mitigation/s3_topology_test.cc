#include "controller/mitigation/s3_topology.h"

#include "controller/mitigation/fake_event_actions.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

class S3TopologyTest : public ::testing::Test {
 protected:
  S3TopologyTest() : ctx_(9, "job", LinkCulprit(), 3, 0.97, 3) {
    ctx_.healthy = absl::Milliseconds(100);
    ctx_.slow = absl::Milliseconds(150);
    ctx_.layouts = &layouts_;
    ctx_.errors = &errors_;
    step_.strategy = analysis::plan::Strategy::kS3Topology;
    step_.iteration = 100;
    step_.reason = "lost 60.00s >= S3 topology cost 60.00s";
  }

  FakeEventActions actions_;
  CountingErrorCounter errors_;
  LayoutsInForce layouts_;
  EventContext ctx_;
  analysis::plan::EscalationStep step_;
  S3Topology s3_;
};

TEST_F(S3TopologyTest, TheNewLayoutIsInForceUntilReverted) {
  EXPECT_EQ(ctx_.Subject(), "job=job event=9 link=0->2");
  absl::StatusOr<PlannedDirective> plan = s3_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->directive.topology_change().assignments_size(), 8);
  ASSERT_TRUE(plan->rollback.has_value());
  EXPECT_EQ(plan->rollback->topology_change().assignments_size(), 8);
  EXPECT_TRUE(layouts_.empty());  // Planned only.
  ASSERT_TRUE(s3_.Issue(step_, *plan, ctx_, actions_).ok());
  EXPECT_EQ(s3_.directive(), 1u);
  EXPECT_EQ(actions_.mitigating, std::vector<std::string>{"S3 topology change (directive 1)"});
  ASSERT_EQ(layouts_.count("job"), 1u);
  EXPECT_EQ(layouts_["job"].dp_size(), 4);
  EXPECT_EQ(s3_.before().world_size(), 8);
  EXPECT_EQ(ctx_.measurement.from(), 103);

  step_.action = analysis::plan::EscalationStep::Action::kRevert;
  step_.reason = "S3 topology disabled while in force";
  s3_.Revert(step_, ctx_, actions_);
  EXPECT_EQ(s3_.directive(), 0u);
  EXPECT_TRUE(layouts_.empty());
  ASSERT_EQ(actions_.directives.size(), 2u);
  const falcon::v1::Directive& revert = actions_.directives[1].directive();
  EXPECT_EQ(revert.reverts_directive_id(), 1u);
  EXPECT_EQ(revert.reason(), "S3 topology disabled while in force: original layout");
  // The original layout: rank r back at dp = r % 4, pp = r / 4.
  for (const auto& a : revert.topology_change().assignments()) {
    EXPECT_EQ(a.dp_index(), a.rank() % 4);
    EXPECT_EQ(a.pp_index(), a.rank() / 4);
  }
  EXPECT_TRUE(actions_.actions.back().revert());
}

TEST_F(S3TopologyTest, ATimedOutDirectiveDropsTheLayout) {
  absl::StatusOr<PlannedDirective> plan = s3_.Plan(step_, ctx_, actions_);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(s3_.Issue(step_, *plan, ctx_, actions_).ok());
  falcon::v1::DirectiveRecord rec = actions_.directives[0];
  rec.set_state(falcon::v1::DirectiveRecord::STATE_TIMED_OUT);
  EXPECT_FALSE(s3_.OnDirectiveState(rec, ctx_, actions_));
  EXPECT_EQ(s3_.directive(), 0u);
  EXPECT_TRUE(layouts_.empty());
}

TEST_F(S3TopologyTest, UnknownJobCannotBePlanned) {
  actions_.job_known = false;
  EXPECT_EQ(s3_.Plan(step_, ctx_, actions_).status().message(), "job unknown");
}

}  // namespace
}  // namespace falcon::controller::mitigation
