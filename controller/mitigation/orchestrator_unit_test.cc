// The orchestrator as a coordinator, driven directly through a recording EventActions: the
// escalation policy's steps reach the strategy objects, a rejected directive skips its level, a
// recovery reverts the plan in force, and the calls that fail are counted where they happen.
#include <memory>
#include <optional>
#include <string>

#include "common/testing/log_capture.h"
#include "controller/mitigation/fake_event_actions.h"
#include "controller/mitigation/orchestrator.h"
#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

// Rank 5 computes 40% longer; 0.3 s were lost before the verdict (S2 costs 5 x 40 ms = 0.2 s).
falcon::v1::Event ComputeEvent() {
  falcon::v1::Event e;
  e.set_event_id(1);
  e.set_job("job");
  e.set_state(falcon::v1::EVENT_STATE_LOCALIZED);
  e.set_cause(falcon::v1::CAUSE_COMPUTE);
  e.add_ranks(5);
  e.set_healthy_iteration_time_ns(100'000'000);
  e.set_slow_iteration_time_ns(140'000'000);
  e.set_slowdown_ratio(1.4);
  e.set_verdict_iteration(100);
  e.set_lost_seconds(0.3);
  return e;
}

// Link 1 -> 5 (node0 -> node2, the two stages of DP replica 1) carries 50% more time per
// iteration; 100 s were lost before the verdict, more than S3 costs.
falcon::v1::Event LinkEvent() {
  falcon::v1::Event e = ComputeEvent();
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  e.clear_ranks();
  falcon::v1::Link* l = e.add_links();
  l->set_src_rank(1);
  l->set_dst_rank(5);
  e.set_slow_iteration_time_ns(150'000'000);
  e.set_slowdown_ratio(1.5);
  e.set_lost_seconds(100);
  return e;
}

class OrchestratorUnitTest : public ::testing::Test {
 protected:
  OrchestratorUnitTest() : orchestrator_(OrchestratorOptions{}, &clock_) {
    orchestrator_.SetErrorCounter(&errors_);
  }
  // Rank 5's stage (pp 1: ranks 4-7) computes 3 summaries each, rank 5 x1.4 of its peers: the
  // compute probe has measured the culprit.
  void FeedProbe(int64_t first_iteration, int64_t culprit_compute_ns = 11'200'000) {
    for (int64_t i = first_iteration; i < first_iteration + 3; ++i) {
      for (uint32_t rank = 4; rank < 8; ++rank) {
        falcon::v1::IterationSummary s;
        s.set_rank(rank);
        s.set_iteration(i);
        s.set_compute_ns(rank == 5 ? culprit_compute_ns : 8'000'000);
        orchestrator_.OnRankIteration(ComputeEvent(), s, actions_);
      }
    }
  }
  // The verdict; S2 waits for the compute probe, which measures the culprit before iteration
  // 101, where the plan is issued.
  void VerdictThenProbe() {
    orchestrator_.OnVerdict(ComputeEvent(), actions_);
    EXPECT_TRUE(actions_.directives.empty()) << "S2 waits for the compute probe";
    FeedProbe(98);
    orchestrator_.OnJobIteration(ComputeEvent(), 101, absl::Milliseconds(140), actions_);
  }
  falcon::v1::DirectiveRecord Directive(uint64_t id, falcon::v1::DirectiveRecord::State state) {
    falcon::v1::DirectiveRecord r = actions_.directives.at(id - 1);
    r.set_state(state);
    r.set_state_reason("rank 1 refused");
    return r;
  }

  common::FakeClock clock_;
  FakeEventActions actions_;
  CountingErrorCounter errors_;
  Orchestrator orchestrator_;
};

TEST_F(OrchestratorUnitTest, VerdictBuysS2AndARejectedDirectiveSkipsIt) {
  VerdictThenProbe();
  EXPECT_EQ(orchestrator_.active_events(), 1u);
  ASSERT_EQ(actions_.actions.size(), 2u);
  EXPECT_EQ(actions_.actions[0].strategy(), falcon::v1::STRATEGY_S1_IGNORE);
  EXPECT_EQ(actions_.actions[1].strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  ASSERT_EQ(actions_.directives.size(), 1u);
  EXPECT_TRUE(actions_.directives[0].directive().has_micro_batch_plan());

  orchestrator_.OnDirectiveState(Directive(1, falcon::v1::DirectiveRecord::STATE_REJECTED),
                                 actions_);
  const falcon::v1::Action& skip = actions_.actions.back();
  EXPECT_EQ(skip.strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(skip.reason(),
            "skip: S2 micro-batch not applicable: directive 1 rejected: rank 1 refused");
  // Not in force: the recovery reverts nothing and ends the event.
  orchestrator_.OnRecovered(ComputeEvent(), actions_);
  EXPECT_EQ(actions_.directives.size(), 1u);
  EXPECT_EQ(orchestrator_.active_events(), 0u);
  EXPECT_TRUE(errors_.counts.empty());
}

TEST_F(OrchestratorUnitTest, APlanThatDoesNotHelpIsRevertedAndSkipped) {
  VerdictThenProbe();
  ASSERT_EQ(actions_.directives.size(), 1u);
  // The plan takes effect at 104; five iterations after it as slow as before.
  for (int64_t i = 102; i <= 109; ++i) {
    orchestrator_.OnJobIteration(ComputeEvent(), i, absl::Milliseconds(140), actions_);
  }
  ASSERT_EQ(actions_.directives.size(), 2u);
  EXPECT_EQ(actions_.directives[1].directive().reverts_directive_id(), 1u);
  EXPECT_NE(actions_.directives[1].directive().reason().find("it did not help"), std::string::npos);
  EXPECT_EQ(actions_.mitigated_times.back(), absl::Milliseconds(140));
  EXPECT_NE(actions_.actions.back().reason().find("skip: S2 micro-batch not applicable"),
            std::string::npos);
}

TEST_F(OrchestratorUnitTest, FailedCallsAreLoggedAndCountedWhereTheyHappen) {
  VerdictThenProbe();
  ASSERT_EQ(actions_.directives.size(), 1u);
  actions_.fail = absl::UnavailableError("store down");
  orchestrator_.OnDirectiveState(Directive(1, falcon::v1::DirectiveRecord::STATE_APPLIED),
                                 actions_);
  EXPECT_EQ(errors_.counts["mitigation_set_job_plan"], 1);
  orchestrator_.OnRecovered(ComputeEvent(), actions_);  // The revert cannot be issued.
  EXPECT_EQ(errors_.counts["mitigation_revert_directive"], 1);
  EXPECT_EQ(orchestrator_.active_events(), 0u);
}

TEST_F(OrchestratorUnitTest, MitigationThatCannotStartIsLoggedAndCountedOncePerEvent) {
  // A localized event without a healthy iteration time (nothing to measure the loss against):
  // the orchestrator tries again at every job iteration, but says so once.
  falcon::v1::Event e = ComputeEvent();
  e.clear_healthy_iteration_time_ns();
  e.clear_slow_iteration_time_ns();
  e.set_slowdown_ratio(1.0);
  common::testing::LogCapture log;
  orchestrator_.OnVerdict(e, actions_);
  for (int64_t i = 101; i <= 140; ++i) {
    orchestrator_.OnJobIteration(e, i, absl::Milliseconds(100), actions_);
  }
  EXPECT_EQ(log.Count("mitigation not started job=job event=1"), 1);
  EXPECT_EQ(errors_.counts["mitigation_start"], 1);
  EXPECT_EQ(orchestrator_.active_events(), 0u);
  EXPECT_TRUE(actions_.actions.empty());
  // A different event is a state change of its own.
  e.set_event_id(2);
  orchestrator_.OnJobIteration(e, 141, absl::Milliseconds(100), actions_);
  EXPECT_EQ(log.Count("mitigation not started"), 2);
  EXPECT_EQ(errors_.counts["mitigation_start"], 2);
}

// Under S3 the job's traffic avoids the slow link, so the job series returning to its healthy
// level says nothing of the link when the plan itself runs the job there: the recovery is refused
// and the plan stays. When the plan left a slowdown (x1.3), a return to healthy is faster than the
// plan can be: the link recovered.
TEST_F(OrchestratorUnitTest, UnderS3TheHealthyLevelThePlanDeliversIsNoRecovery) {
  actions_.settings.s3_cost_seconds = 1;
  orchestrator_.OnVerdict(LinkEvent(), actions_);
  ASSERT_EQ(actions_.directives.size(), 1u);
  ASSERT_TRUE(actions_.directives[0].directive().has_topology_change())
      << actions_.directives[0].DebugString();
  orchestrator_.OnDirectiveState(Directive(1, falcon::v1::DirectiveRecord::STATE_APPLIED),
                                 actions_);
  falcon::v1::Event e = LinkEvent();
  e.set_state(falcon::v1::EVENT_STATE_MITIGATING);
  e.set_mitigated_iteration_time_ns(104'000'000);  // Within 10% of healthy: the plan's doing.
  const std::optional<std::string> refused = orchestrator_.StillSlow(e, actions_);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->find("x1.04 of its healthy time"), std::string::npos) << *refused;
  EXPECT_NE(refused->find("the plan stays"), std::string::npos) << *refused;
  e.set_mitigated_iteration_time_ns(130'000'000);
  EXPECT_EQ(orchestrator_.StillSlow(e, actions_), std::nullopt);
  EXPECT_TRUE(errors_.counts.empty());
}

// A first S2 plan is sized from the culprit's compute in training (the compute probe), not from
// the validation GEMM, which can overstate it (seen: x3.89 for a x1.5 CPU-quota fault, whose
// plan then starved the culprit's group and recovered 15% of the slowdown): it waits for the
// probe, and is sized from the GEMM only when the probe measured nothing for
// kS2ProbeWaitIterations job iterations.
TEST_F(OrchestratorUnitTest, AFirstS2PlanWaitsForTheComputeProbeBeforeTheGemmSizesIt) {
  falcon::v1::Event e = ComputeEvent();
  e.set_validation_ratio(3.9);
  orchestrator_.OnVerdict(e, actions_);
  EXPECT_TRUE(actions_.directives.empty());
  orchestrator_.OnJobIteration(e, 101, absl::Milliseconds(140), actions_);
  EXPECT_TRUE(actions_.directives.empty()) << "the probe has not measured yet";
  FeedProbe(100);
  orchestrator_.OnJobIteration(e, 102, absl::Milliseconds(140), actions_);
  ASSERT_EQ(actions_.directives.size(), 1u);
  const std::string& reason = actions_.directives[0].directive().reason();
  EXPECT_NE(reason.find("culprit stage slowdown x1.40"), std::string::npos) << reason;
  EXPECT_GE(actions_.actions.back().iteration(), 102);  // Issued at 102, in force from then on.
}

TEST_F(OrchestratorUnitTest, WithoutProbeSummariesTheLocalizationsMeasurementSizesS2) {
  falcon::v1::Event e = ComputeEvent();
  e.set_validation_ratio(3.9);
  orchestrator_.OnVerdict(e, actions_);
  const int64_t last_wait = 100 + Orchestrator::kS2ProbeWaitIterations - 1;
  for (int64_t i = 101; i <= last_wait; ++i) {
    orchestrator_.OnJobIteration(e, i, absl::Milliseconds(140), actions_);
  }
  EXPECT_TRUE(actions_.directives.empty());
  orchestrator_.OnJobIteration(e, last_wait + 1, absl::Milliseconds(140), actions_);
  ASSERT_EQ(actions_.directives.size(), 1u);
  const std::string& reason = actions_.directives[0].directive().reason();
  EXPECT_NE(reason.find("culprit stage slowdown x3.90"), std::string::npos) << reason;
}

// The probe measures the culprit at its peers' speed: S2 is skipped, never sized from the GEMM.
TEST_F(OrchestratorUnitTest, AProbeThatMeasuresNoSlowGroupSkipsS2) {
  falcon::v1::Event e = ComputeEvent();
  e.set_validation_ratio(3.9);
  orchestrator_.OnVerdict(e, actions_);
  FeedProbe(100, 8'000'000);
  orchestrator_.OnJobIteration(e, 102, absl::Milliseconds(140), actions_);
  EXPECT_TRUE(actions_.directives.empty());
  bool skipped = false;
  for (const falcon::v1::Action& a : actions_.actions) {
    skipped = skipped || (a.strategy() == falcon::v1::STRATEGY_S2_MICRO_BATCH &&
                          a.reason().find("at x1.00 of its stage peers'") != std::string::npos);
  }
  EXPECT_TRUE(skipped);
}

// The event recovers while S2 waits: nothing was issued, so nothing is reverted.
TEST_F(OrchestratorUnitTest, ARecoveryWhileS2WaitsForTheProbeIssuesNothing) {
  orchestrator_.OnVerdict(ComputeEvent(), actions_);
  orchestrator_.OnJobIteration(ComputeEvent(), 101, absl::Milliseconds(140), actions_);
  orchestrator_.OnRecovered(ComputeEvent(), actions_);
  EXPECT_TRUE(actions_.directives.empty());
  EXPECT_EQ(orchestrator_.active_events(), 0u);
  for (const falcon::v1::Action& a : actions_.actions) {
    EXPECT_FALSE(a.revert()) << a.DebugString();
  }
  EXPECT_TRUE(errors_.counts.empty());
}

}  // namespace
}  // namespace falcon::controller::mitigation
