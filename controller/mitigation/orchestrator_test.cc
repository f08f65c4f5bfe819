// The orchestrator inside a real Controller (in process, FakeClock, in-memory store), fed by
// simulated agents that answer validation and ack directives: a compute fail-slow on rank 5 of a
// DP=4 x PP=2 job goes S1 -> S2 within the escalation budget, the plan in force is measured and
// is not mistaken for a recovery, and the fault clearing (seen in rank 5's compute time per
// micro-batch, which the plan hides from the iteration time) reverts it; dry run records without
// sending; with S2 disabled the ladder reaches S4 and the restart closes the event. Concurrent
// events: two compute fail-slows in different DP groups, one after the other, are localized by
// two events and mitigated by one S2 plan; a slowdown gone before the verdict closes as transient
// without a pause; outside load before a fault does not hide the fault.
#include "controller/mitigation/orchestrator.h"

#include <limits>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/log_capture.h"
#include "common/testing/series_value.h"
#include "controller/control_api.h"
#include "controller/controller.h"
#include "controller/metrics/metric_table.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/sim_agent.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace falcon::controller::mitigation {
namespace {

using testing::LayoutSpec;
using testing::SimAgent;

constexpr int64_t kHealthyNs = 100'000'000;
constexpr int64_t kSlowNs = 140'000'000;       // Rank 5 computes 40% longer (job-wide wait).
constexpr int64_t kMitigatedNs = 116'000'000;  // Under the S2 plan.

class OrchestratorTest : public ::testing::Test {
 protected:
  explicit OrchestratorTest(ControllerOptions options = ControllerOptions())
      : kv_(store::ControllerStore::TableNames()),
        metrics_(registry_, "t"),
        orchestrator_(std::make_unique<Orchestrator>(OrchestratorOptions{}, &clock_)),
        options_(options) {
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 2;  // 8 ranks on 4 nodes.
    auto c = Controller::Create(options, &kv_, &clock_, &metrics_, orchestrator_.get());
    EXPECT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      agents_.push_back(std::make_unique<SimAgent>(testing::NodeName(n), testing::NodeName(n),
                                                   testing::RanksOfNode(spec_, n)));
      EXPECT_TRUE(agents_.back()->Connect(*c_, {Registration(n)}).ok());
    }
  }

  falcon::v1::JobRegistration Registration(uint32_t node) const {
    falcon::v1::JobRegistration reg = testing::NodeRegistration(spec_, node);
    reg.set_global_micro_batches(32);
    return reg;
  }

  // The controller process restarts on the same store: the orchestrator's state is lost, and
  // the agents reconnect and go on with their next sequence.
  void RestartController() {
    for (auto& a : agents_) a->Disconnect(*c_);
    c_.reset();
    orchestrator_ = std::make_unique<Orchestrator>(OrchestratorOptions{}, &clock_);
    auto c = Controller::Create(options_, &kv_, &clock_, &metrics_, orchestrator_.get());
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
    for (uint32_t n = 0; n < agents_.size(); ++n) {
      ASSERT_TRUE(
          agents_[n]->Connect(*c_, {Registration(n)}, agents_[n]->last_sequence() + 1).ok());
    }
  }

  void Set(const std::function<void(falcon::v1::Settings*)>& f) {
    falcon::v1::Settings s;
    s.set_job(spec_.job);
    f(&s);
    ASSERT_TRUE(c_->SetSettings(s).ok());
  }

  // The micro-batch plan the ranks run at iteration `i`: the latest APPLIED plan directive due
  // (the even split before any).
  std::vector<uint32_t> PlanAt(int64_t i) const {
    for (const auto& r : c_->directives().List(spec_.job, 0)) {  // Newest first.
      const falcon::v1::Directive& d = r.directive();
      if (!d.has_micro_batch_plan() || r.state() != falcon::v1::DirectiveRecord::STATE_APPLIED ||
          d.effective_iteration() > i) {
        continue;
      }
      return {d.micro_batch_plan().micro_batches().begin(),
              d.micro_batch_plan().micro_batches().end()};
    }
    return {8, 8, 8, 8};
  }

  // Iterations [from, to); rank 5 is slow while `fault(i)`. Under an uneven plan the job takes
  // kMitigatedNs while the fault lasts and plan_without_fault_ns_ after it cleared (the plan's
  // imbalance), and
  // every rank reports compute time proportional to its group's micro-batches (rank 5's x1.4
  // while slow): what the per-rank probe sees. `shift(i)` (ns, may be negative) is added to every
  // rank's iteration time, and its compute grows in proportion: load from outside the job that
  // comes or goes.
  void Run(int64_t from, int64_t to, const std::function<bool(int64_t)>& fault,
           const std::function<int64_t(int64_t)>& shift = nullptr) {
    for (int64_t i = from; i < to; ++i) {
      const bool slow = fault(i);
      const std::vector<uint32_t> plan = PlanAt(i);
      const bool uneven =
          !std::all_of(plan.begin(), plan.end(), [&](uint32_t v) { return v == plan[0]; });
      const int64_t noise = ((i * 104729) % 201 - 100) * 10'000;
      const int64_t base =
          uneven ? (slow ? kMitigatedNs : plan_without_fault_ns_) : (slow ? kSlowNs : kHealthyNs);
      const int64_t t = base + noise + (shift ? shift(i) : 0);
      const int64_t extra = base - kHealthyNs;
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          // The split of compute and communication without the fault (outside load slows
          // both), plus what the slow rank adds below.
          falcon::v1::IterationSummary s =
              testing::MakeSummary(spec_, r, i, kHealthyNs + noise + (shift ? shift(i) : 0));
          s.set_iteration_time_ns(t);
          if (uneven) {
            // The even split's compute per micro-batch (8 each), times the group's share.
            const double factor = r == 5 && slow ? 1.4 : 1.0;
            s.set_compute_ns(static_cast<int64_t>(static_cast<double>(s.compute_ns()) / 8 *
                                                  plan[r % 4] * factor));
          } else if (extra > 0) {
            if (r == 5) {
              s.set_compute_ns(s.compute_ns() + extra);
            } else {
              for (auto& cs : *s.mutable_comms()) {
                if (cs.comm_id() == 1001) {
                  cs.set_wait_ns(cs.wait_ns() + extra);
                  cs.set_busy_ns(cs.busy_ns() + extra);
                }
              }
              if (r / spec_.dp != 1) s.set_compute_ns(s.compute_ns() + extra);
            }
          }
          if (uneven && blind_probe_) s.set_compute_ns(0);
          *b.add_iterations() = s;
        }
        auto ack = a->Send(*c_, b);
        ASSERT_TRUE(ack.ok()) << ack.status();
      }
      testing::Responder responder;
      responder.gemm_ns = [slow](uint32_t r) { return r == 5 && slow ? 1'400'000 : 1'000'000; };
      for (int answered = 1; answered > 0;) {
        answered = 0;
        for (auto& a : agents_) answered += a->Respond(*c_, responder);
      }
      c_->Tick();
      clock_.Advance(absl::Nanoseconds(t));
    }
  }

  // Iterations [from, to) under the pipeline cost model (planner.h): DP group d takes
  // (P - 1)·c + m_d·s_d·c with c = healthy / (8 + 1) and s_d = 1.4 when one of its ranks is slow
  // at i (`slow(i)`, the slow ranks); the iteration is the slowest group. Every rank reports
  // compute proportional to its group's micro-batches (x1.4 when slow), and the GEMM of a slow
  // rank takes x1.4.
  void RunModel(int64_t from, int64_t to,
                const std::function<std::vector<uint32_t>(int64_t)>& slow) {
    for (int64_t i = from; i < to; ++i) {
      const std::vector<uint32_t> bad = slow(i);
      auto is_bad = [&](uint32_t r) { return std::find(bad.begin(), bad.end(), r) != bad.end(); };
      const std::vector<uint32_t> plan = PlanAt(i);
      const double c = kHealthyNs / 9.0;
      double t = 0;
      for (uint32_t d = 0; d < 4; ++d) {
        const double s = is_bad(d) || is_bad(d + 4) ? 1.4 : 1.0;
        t = std::max(t, c + plan[d] * s * c);
      }
      const int64_t noise = ((i * 104729) % 201 - 100) * 10'000;
      const int64_t ns = static_cast<int64_t>(t) + noise;
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, ns);
          s.set_compute_ns(static_cast<int64_t>(4'000'000 * plan[r % 4] * (is_bad(r) ? 1.4 : 1.0)));
          *b.add_iterations() = s;
        }
        auto ack = a->Send(*c_, b);
        ASSERT_TRUE(ack.ok()) << ack.status();
      }
      testing::Responder responder;
      responder.gemm_ns = [&](uint32_t r) { return is_bad(r) ? 1'400'000 : 1'000'000; };
      for (int answered = 1; answered > 0;) {
        answered = 0;
        for (auto& a : agents_) answered += a->Respond(*c_, responder);
      }
      c_->Tick();
      clock_.Advance(absl::Nanoseconds(ns));
    }
  }

  // falcon_controller_active_fail_slows{job} (-1: no series).
  double ActiveGauge() {
    return common::testing::SeriesValue(registry_.Collect(), metrics::kActiveFailSlows.name,
                                        {{"job", spec_.job}})
        .value_or(-1);
  }

  std::vector<falcon::v1::Event> EventsOldestFirst() {
    ControlApi api(c_.get());
    auto r = api.ListEvents({});
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<falcon::v1::Event> out(r->events().rbegin(), r->events().rend());
    return out;
  }

  falcon::v1::Event OnlyEvent() {
    ControlApi api(c_.get());
    auto r = api.ListEvents({});
    EXPECT_EQ(r->events_size(), 1);
    return r->events_size() > 0 ? r->events(0) : falcon::v1::Event();
  }
  std::vector<falcon::v1::DirectiveRecord> Plans() {
    std::vector<falcon::v1::DirectiveRecord> out;
    for (const auto& r : c_->directives().List(spec_.job, 0)) {
      if (r.directive().has_micro_batch_plan() || r.directive().has_topology_change() ||
          r.directive().has_checkpoint_restart()) {
        out.insert(out.begin(), r);  // Oldest first.
      }
    }
    return out;
  }

  LayoutSpec spec_;
  int64_t plan_without_fault_ns_ = 110'000'000;
  // Run: under an uneven plan the ranks report no compute time (the compute probe sees nothing).
  bool blind_probe_ = false;
  common::FakeClock clock_;
  store::InMemoryKvStore kv_;
  prometheus::Registry registry_;
  metrics::ControllerMetrics metrics_;
  std::unique_ptr<Orchestrator> orchestrator_;
  ControllerOptions options_;
  std::unique_ptr<Controller> c_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
};

TEST_F(OrchestratorTest, ComputeFailSlowGetsS2ThenRevertOnRecovery) {
  auto fault = [](int64_t i) { return i >= 60 && i < 170; };
  Run(0, 120, fault);
  falcon::v1::Event e = OnlyEvent();
  ASSERT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
  ASSERT_GE(e.actions_size(), 2) << e.DebugString();
  EXPECT_EQ(e.actions(0).strategy(), falcon::v1::STRATEGY_S1_IGNORE);
  const falcon::v1::Action& s2 = e.actions(1);
  EXPECT_EQ(s2.strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_FALSE(s2.dry_run());
  EXPECT_NE(s2.directive_id(), 0u);
  // Why: the lost time paid for S2 (5 x Δt_iter = 0.2 s) within the escalation budget.
  EXPECT_NE(s2.reason().find("lost "), std::string::npos) << s2.reason();
  EXPECT_NE(s2.reason().find(">= S2 micro-batch cost 0.2"), std::string::npos) << s2.reason();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << e.DebugString();
  std::vector<falcon::v1::DirectiveRecord> plans = Plans();
  ASSERT_EQ(plans.size(), 1u);
  const auto& m = plans[0].directive().micro_batch_plan().micro_batches();
  EXPECT_EQ(std::accumulate(m.begin(), m.end(), 0u), 32u);
  EXPECT_LT(m[1], 8u);  // Rank 5 is in DP group 1.
  EXPECT_EQ(plans[0].state(), falcon::v1::DirectiveRecord::STATE_APPLIED);
  // Ahead of every rank when issued: at least the minimum lead past the verdict.
  EXPECT_GE(s2.iteration(), e.verdict_iteration() + 2);
  EXPECT_EQ(plans[0].directive().effective_iteration(), s2.iteration());
  EXPECT_TRUE(plans[0].has_rollback());
  // The job's plan in force, and the measured iteration time under it.
  falcon::v1::Job job = c_->JobView(*c_->registry().Find(spec_.job));
  EXPECT_EQ(std::vector<uint32_t>(job.micro_batches().begin(), job.micro_batches().end()),
            std::vector<uint32_t>(m.begin(), m.end()));
  EXPECT_NEAR(e.mitigated_iteration_time_ns(), kMitigatedNs, 2'000'000);
  // The plan's recoverable ceiling, on the measured healthy time (no blocks registered: the even
  // split is the job's, the layer split empty).
  ASSERT_TRUE(e.has_ceiling()) << e.DebugString();
  EXPECT_EQ(e.ceiling().strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_EQ(e.ceiling().healthy_iteration_time_ns(), e.healthy_iteration_time_ns());
  EXPECT_GT(e.ceiling().recoverable(), 0.3);
  EXPECT_LT(e.ceiling().predicted_iteration_time_ns(), e.ceiling().slowed_iteration_time_ns());
  EXPECT_EQ(job.layer_split_size(), 0);

  // The fault clears: the job's iteration time hardly moves under the plan (116 -> 110 ms), but
  // rank 5's compute per micro-batch is back at its peers': the event recovers and S2 is reverted
  // to the even split.
  Run(120, 230, fault);
  e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  EXPECT_NE(e.transitions(e.transitions_size() - 1).reason().find("compute per micro-batch"),
            std::string::npos)
      << e.DebugString();
  EXPECT_GE(e.recovery_iteration(), 170);
  EXPECT_LE(e.recovery_iteration(), 185);
  const falcon::v1::Action& last = e.actions(e.actions_size() - 1);
  EXPECT_TRUE(last.revert()) << e.DebugString();
  EXPECT_EQ(last.strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  plans = Plans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].directive().reverts_directive_id(), plans[0].directive().directive_id());
  const auto& even = plans[1].directive().micro_batch_plan().micro_batches();
  EXPECT_EQ(std::vector<uint32_t>(even.begin(), even.end()), (std::vector<uint32_t>{8, 8, 8, 8}));
  EXPECT_GT(plans[1].directive().plan_version(), plans[0].directive().plan_version());
  // The revert leaves no plan in force: the event keeps its last plan's ceiling, beside the
  // mitigated iteration time measured under it.
  ASSERT_TRUE(e.has_ceiling()) << "the last plan's ceiling: " << e.DebugString();
  EXPECT_EQ(e.ceiling().strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
}

// Outside load that ends while the fault lasts speeds the job up (116 -> 91 ms under the plan)
// but does not recover the event: the compute probe still sees rank 5 at x1.4 of its stage peers,
// so the recovery is refused (and logged); the fault clearing later recovers it through the probe.
TEST_F(OrchestratorTest, AnOutsideSpeedupWhileTheCulpritIsStillSlowDoesNotRecover) {
  common::testing::LogCapture log;
  auto fault = [](int64_t i) { return i >= 60 && i < 170; };
  auto load_ends = [](int64_t i) -> int64_t { return i >= 125 ? -25'000'000 : 0; };
  Run(0, 165, fault, load_ends);
  falcon::v1::Event e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << e.DebugString();
  const std::vector<std::string> refused = log.Matching("recovery refused job=" + spec_.job);
  ASSERT_FALSE(refused.empty()) << absl::StrJoin(log.Lines(), "\n");
  EXPECT_NE(refused[0].find("still x1.4"), std::string::npos) << refused[0];
  Run(165, 230, fault, load_ends);
  e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  EXPECT_NE(e.transitions(e.transitions_size() - 1).reason().find("compute per micro-batch"),
            std::string::npos)
      << e.DebugString();
  EXPECT_GE(e.recovery_iteration(), 170);
  EXPECT_TRUE(e.actions(e.actions_size() - 1).revert()) << e.DebugString();
}

// The same after a controller restart with S2 in force (seen in CI: the rebuilt event measured
// nothing under the plan, so the speed-up recovered it, S2 was reverted with the fault still on,
// and a second event blamed the same rank): the rebuilt probe refuses the recovery as before.
TEST_F(OrchestratorTest, AnOutsideSpeedupAfterAControllerRestartDoesNotRecoverTheEvent) {
  common::testing::LogCapture log;
  auto fault = [](int64_t i) { return i >= 60 && i < 230; };
  auto load_ends = [](int64_t i) -> int64_t { return i >= 140 ? -25'000'000 : 0; };
  Run(0, 125, fault, load_ends);
  ASSERT_EQ(Plans().size(), 1u);
  const falcon::v1::PlanCeiling ceiling = OnlyEvent().ceiling();
  ASSERT_EQ(ceiling.strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  RestartController();
  // The ceiling is stored with the event and kept by the rebuilt state.
  EXPECT_EQ(OnlyEvent().ceiling().SerializeAsString(), ceiling.SerializeAsString());
  Run(125, 200, fault, load_ends);
  falcon::v1::Event e = OnlyEvent();
  EXPECT_EQ(e.ceiling().SerializeAsString(), ceiling.SerializeAsString());
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << e.DebugString();
  EXPECT_EQ(Plans().size(), 1u) << "S2 stays while the fault lasts";
  ASSERT_FALSE(log.Matching("mitigation state rebuilt").empty());
  EXPECT_EQ(log.Matching("measuring_from=-1").size(), 0u) << absl::StrJoin(log.Lines(), "\n");
  // The fault clearing still recovers it through the probe, and S2 is reverted.
  Run(200, 300, fault, load_ends);
  e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  EXPECT_GE(e.recovery_iteration(), 230);
  EXPECT_TRUE(e.actions(e.actions_size() - 1).revert()) << e.DebugString();
}

// A burst of load on the machines while the S2 plan is measured: every rank's iteration x1.5
// longer (its compute too) for the plan's first 8 iterations. Measured alone, the plan ran slower
// than the slow level (166 ms vs 140 ms) and was reverted; the ranks that are no culprit compute
// x1.5 under it, so that is outside load: without it the plan ran 111 ms, and it stays.
TEST_F(OrchestratorTest, ABurstOfOutsideLoadWhileThePlanIsMeasuredDoesNotRevertIt) {
  common::testing::LogCapture log;
  auto fault = [](int64_t i) { return i >= 60; };
  int64_t effective = std::numeric_limits<int64_t>::max();
  auto burst = [&](int64_t i) -> int64_t {
    return i > effective && i <= effective + 8 ? 50'000'000 : 0;
  };
  for (int64_t i = 0; i < 150; ++i) {
    Run(i, i + 1, fault, burst);
    if (effective == std::numeric_limits<int64_t>::max() && !Plans().empty()) {
      effective = Plans()[0].directive().effective_iteration();
    }
  }
  ASSERT_NE(effective, std::numeric_limits<int64_t>::max()) << "no S2 plan";
  const falcon::v1::Event e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << e.DebugString();
  EXPECT_EQ(Plans().size(), 1u) << e.DebugString();
  const std::vector<std::string> kept = log.Matching("plan kept job=" + spec_.job);
  ASSERT_EQ(kept.size(), 1u) << absl::StrJoin(log.Lines(), "\n");
  // x1.49-1.50 (the per-iteration noise), divided out.
  EXPECT_NE(kept[0].find("outside load on the culprit's stage peers' compute: 0.11"),
            std::string::npos)
      << kept[0];
  EXPECT_EQ(log.Count("plan did not help"), 0);
}

// A fault that clears before any plan (S2 priced out of reach) while load from outside the job
// arrives as it ends and keeps the iteration time at the slow level: the job's series shows no
// recovery, but rank 5 computes like its stage peers again, so the compute probe recovers the
// event (before: LOCALIZED for good).
TEST_F(OrchestratorTest, AFaultThatClearsUnderOutsideLoadRecoversBeforeAnyPlan) {
  Set([](falcon::v1::Settings* s) { s->set_s2_cost_iterations(1e6); });
  auto fault = [](int64_t i) { return i >= 60 && i < 100; };
  auto load = [](int64_t i) -> int64_t { return i >= 95 ? 40'000'000 : 0; };
  Run(0, 140, fault, load);
  const std::vector<falcon::v1::Event> events = EventsOldestFirst();
  ASSERT_FALSE(events.empty());
  const falcon::v1::Event& e = events[0];
  ASSERT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  EXPECT_NE(e.transitions(e.transitions_size() - 1).reason().find("no plan in force"),
            std::string::npos)
      << e.DebugString();
  EXPECT_GE(e.recovery_iteration(), 100);
  EXPECT_LE(e.recovery_iteration(), 110);
  EXPECT_TRUE(Plans().empty());
  // The load it leaves is outside load (docs/algorithms.md#transients): nothing blamed.
  for (size_t k = 1; k < events.size(); ++k) {
    EXPECT_TRUE(events[k].transient()) << events[k].DebugString();
    EXPECT_EQ(events[k].cause(), falcon::v1::CAUSE_UNKNOWN) << events[k].DebugString();
  }
}

// A short fault that clears as its S2 plan takes effect (seen on the netns cluster: a 14-iteration
// CPU-quota blip): the plan, sized for a slow group that is no longer slow, runs the job as slowly
// as the fault did, is measured no faster than the slow level and reverted. The job is then back
// at its healthy level with no plan in force, so the fail-slow is gone: the event recovers, though
// the speed-up starts where the revert took effect (before: taken for the revert's doing, the
// event stayed MITIGATING for good). The compute probe would see rank 5 clear first; here the
// ranks stop reporting compute time as the plan starts, so only the iteration time tells.
TEST_F(OrchestratorTest, AFaultThatClearsAsItsPlanStartsRecoversAfterTheRevert) {
  plan_without_fault_ns_ = kSlowNs;
  blind_probe_ = true;
  int64_t clear_at = std::numeric_limits<int64_t>::max();
  auto fault = [&](int64_t i) { return i >= 60 && i < clear_at; };
  int64_t i = 0;
  for (; i < 120 && clear_at == std::numeric_limits<int64_t>::max(); ++i) {
    Run(i, i + 1, fault);
    for (const falcon::v1::DirectiveRecord& r : Plans()) {
      clear_at = r.directive().effective_iteration();
    }
  }
  ASSERT_LT(clear_at, 120) << "no S2 plan";
  Run(i, 220, fault);
  const falcon::v1::Event e = OnlyEvent();
  ASSERT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  std::vector<falcon::v1::DirectiveRecord> plans = Plans();
  ASSERT_EQ(plans.size(), 2u) << e.DebugString();
  EXPECT_EQ(plans[1].directive().reverts_directive_id(), plans[0].directive().directive_id());
  // Recovered where the job came back to healthy: at the revert, not at the end of the run.
  EXPECT_GE(e.recovery_iteration(), plans[1].directive().effective_iteration() - 3);
  EXPECT_LE(e.recovery_iteration(), plans[1].directive().effective_iteration() + 10);
}

// The controller's log tells one consistent story of the event (docs/operations.md#logs).
TEST_F(OrchestratorTest, TheLogTellsOneConsistentStory) {
  common::testing::LogCapture log;
  Run(0, 230, [](int64_t i) { return i >= 60 && i < 170; });
  const falcon::v1::Event e = OnlyEvent();
  ASSERT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED) << e.DebugString();
  // One "directive issued" line per directive, with its epoch.
  for (const auto& r : c_->directives().List(spec_.job, 0)) {
    const std::string id = absl::StrCat(" directive=", r.directive().directive_id(), " ");
    int lines = 0;
    for (const std::string& l : log.Matching("directive issued ")) {
      if (l.find(id) == std::string::npos) continue;
      ++lines;
      EXPECT_NE(l.find(" epoch="), std::string::npos) << l;
    }
    EXPECT_EQ(lines, 1) << "directive" << id;
  }
  // No rank is named before the verdict names one: the opening line gives the series.
  const std::vector<std::string> opened = log.Matching("event opened job=job event=1");
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].find(" rank="), std::string::npos) << opened[0];
  EXPECT_NE(opened[0].find(" series="), std::string::npos) << opened[0];
  for (const std::string& l : log.Matching("event confirmed job=job event=1")) {
    EXPECT_EQ(l.find(" rank="), std::string::npos) << l;
  }
  ASSERT_EQ(log.Count("event localized job=job event=1 rank=5 "), 1);
  // Transitions happen where their reasons say: CONFIRMED at the alarm, RECOVERED at the
  // recovery.
  for (const falcon::v1::StateTransition& t : e.transitions()) {
    if (t.state() == falcon::v1::EVENT_STATE_CONFIRMED) {
      EXPECT_EQ(t.iteration(), e.alarm_iteration()) << t.reason();
    }
    if (t.state() == falcon::v1::EVENT_STATE_RECOVERED) {
      EXPECT_EQ(t.iteration(), e.recovery_iteration()) << t.reason();
      EXPECT_NE(t.reason().find(absl::StrCat("at iteration ", e.recovery_iteration())),
                std::string::npos)
          << t.reason();
    }
  }
  // The S2 plan line names the stage slowdown the plan is sized for; the ladder ends at S2 (S3 and
  // S4 were never bought).
  const std::vector<std::string> ended = log.Matching("mitigation ended job=job event=1");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_NE(ended[0].find(" highest=s2 "), std::string::npos) << ended[0];
  EXPECT_EQ(log.Count("measured_stage_slowdown=0"), 0);
  // Handled errors: none in this story.
  EXPECT_TRUE(log.Warnings().empty()) << log.Warnings()[0];
}

// falconctl plan JOB --dry-run while S2 is in force and the fault is live: the plan is the one in
// force (sized from the culprit's measured slowdown, as S2 did), never its undoing, and every step
// shows its real or projected iteration.
TEST_F(OrchestratorTest, DryRunDuringS2PlansAsS2DidAndShowsRealIterations) {
  auto fault = [](int64_t i) { return i >= 60 && i < 170; };
  Run(0, 120, fault);
  const falcon::v1::Event e = OnlyEvent();
  ASSERT_EQ(e.state(), falcon::v1::EVENT_STATE_MITIGATING) << e.DebugString();
  std::vector<falcon::v1::DirectiveRecord> plans = Plans();
  ASSERT_EQ(plans.size(), 1u);
  const auto& in_force = plans[0].directive().micro_batch_plan().micro_batches();
  ControlApi api(c_.get());
  falcon::v1::DryRunPlanRequest req;
  req.set_job(spec_.job);
  absl::StatusOr<falcon::v1::DryRunPlanResponse> r = api.DryRunPlan(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::vector<uint32_t>(r->micro_batch_plan().micro_batches().begin(),
                                  r->micro_batch_plan().micro_batches().end()),
            std::vector<uint32_t>(in_force.begin(), in_force.end()))
      << r->DebugString();
  const int64_t now = c_->JobView(*c_->registry().Find(spec_.job)).last_iteration();
  ASSERT_EQ(r->actions_size(), 4) << r->DebugString();
  for (const falcon::v1::Action& a : r->actions()) {
    switch (a.strategy()) {
      case falcon::v1::STRATEGY_S1_IGNORE:
        EXPECT_EQ(a.iteration(), e.actions(0).iteration()) << a.reason();
        break;
      case falcon::v1::STRATEGY_S2_MICRO_BATCH: {  // Taken: where it took effect.
        EXPECT_EQ(a.iteration(), e.actions(1).iteration()) << a.reason();
        EXPECT_NE(a.reason().find("applied at iteration"), std::string::npos) << a.reason();
        // Planned as S2 plans: from the split S2 replaced, sized for the stage slowdown the probe
        // measures now (rank 5 computes 40% longer per micro-batch).
        EXPECT_NE(a.reason().find("(was [8, 8, 8, 8]), culprit stage slowdown x1.40"),
                  std::string::npos)
            << a.reason();
        break;
      }
      default:  // To come: when the lost time would pay for it.
        EXPECT_GT(a.iteration(), now) << a.reason();
        break;
    }
  }
}

TEST_F(OrchestratorTest, DryRunRecordsWithoutSending) {
  Set([](falcon::v1::Settings* s) { s->set_dry_run(true); });
  Run(0, 110, [](int64_t i) { return i >= 60; });
  falcon::v1::Event e = OnlyEvent();
  ASSERT_GE(e.actions_size(), 2) << e.DebugString();
  EXPECT_EQ(e.actions(1).strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  EXPECT_TRUE(e.actions(1).dry_run());
  EXPECT_EQ(e.actions(1).directive_id(), 0u);
  EXPECT_TRUE(Plans().empty());
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_LOCALIZED);
}

TEST_F(OrchestratorTest, WithS2DisabledTheLadderReachesS4AndTheRestartClosesTheEvent) {
  Set([](falcon::v1::Settings* s) {
    s->set_s2_enabled(false);
    s->set_s3_cost_seconds(1);
    s->set_s4_cost_seconds(2);
  });
  Run(0, 150, [](int64_t i) { return i >= 60; });
  falcon::v1::Event e = OnlyEvent();
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_CLOSED) << e.DebugString();
  for (const auto& a : e.actions()) EXPECT_NE(a.strategy(), falcon::v1::STRATEGY_S2_MICRO_BATCH);
  const falcon::v1::Action& last = e.actions(e.actions_size() - 1);
  EXPECT_EQ(last.strategy(), falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART) << e.DebugString();
  EXPECT_NE(last.reason().find(">= S4 checkpoint-restart cost 2"), std::string::npos)
      << last.reason();
  std::vector<falcon::v1::DirectiveRecord> plans = Plans();
  ASSERT_FALSE(plans.empty());
  const falcon::v1::Directive& s4 = plans.back().directive();
  ASSERT_TRUE(s4.has_checkpoint_restart());
  EXPECT_EQ(std::vector<uint32_t>(s4.checkpoint_restart().excluded_ranks().begin(),
                                  s4.checkpoint_restart().excluded_ranks().end()),
            std::vector<uint32_t>{5});
  // S4 bumps the epoch fence.
  EXPECT_GT(s4.epoch(), c_->registry().Find(spec_.job)->epoch());
}

}  // namespace
}  // namespace falcon::controller::mitigation

namespace falcon::controller::mitigation {
namespace {

// Rank 5 (DP group 1) slows down at 60 and is mitigated by S2; rank 2 (DP group 2) slows down at
// 130, after that verdict: a second event localizes it (leaving rank 5, event 1's, out) and its S2
// plan is one plan for both slow groups, sized from both ranks' measured slowdowns. Rank 5 then
// recovers: its event hands the plan over and event 2 plans again for rank 2 alone.
TEST_F(OrchestratorTest, TwoComputeFailSlowsInDifferentDpGroupsGetOneS2Plan) {
  auto slow = [](int64_t i) {
    std::vector<uint32_t> r;
    if (i >= 60 && i < 230) r.push_back(5);
    if (i >= 130) r.push_back(2);
    return r;
  };
  RunModel(0, 200, slow);
  std::vector<falcon::v1::Event> events = EventsOldestFirst();
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& first = events[0];
  const falcon::v1::Event& second = events[1];
  EXPECT_EQ(first.cause(), falcon::v1::CAUSE_COMPUTE) << first.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(first.ranks().begin(), first.ranks().end()),
            std::vector<uint32_t>{5});
  EXPECT_EQ(first.state(), falcon::v1::EVENT_STATE_MITIGATING) << first.DebugString();
  EXPECT_EQ(second.cause(), falcon::v1::CAUSE_COMPUTE) << second.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(second.ranks().begin(), second.ranks().end()),
            std::vector<uint32_t>{2})
      << second.DebugString();
  EXPECT_EQ(second.state(), falcon::v1::EVENT_STATE_MITIGATING) << second.DebugString();
  // The job lists both.
  falcon::v1::Job job = c_->JobView(*c_->registry().Find(spec_.job));
  EXPECT_EQ(std::vector<uint64_t>(job.active_event_ids().begin(), job.active_event_ids().end()),
            (std::vector<uint64_t>{first.event_id(), second.event_id()}));
  // One S2 plan in force for both slow DP groups (1 and 2), issued for the second event.
  std::vector<falcon::v1::DirectiveRecord> plans = Plans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].event_id(), second.event_id());
  EXPECT_EQ(plans[1].state(), falcon::v1::DirectiveRecord::STATE_APPLIED);
  const auto& m = plans[1].directive().micro_batch_plan().micro_batches();
  ASSERT_EQ(m.size(), 4);
  EXPECT_EQ(std::accumulate(m.begin(), m.end(), 0u), 32u);
  EXPECT_LT(m[1], 8u) << plans[1].directive().reason();
  EXPECT_LT(m[2], 8u) << plans[1].directive().reason();
  EXPECT_GT(m[0], 8u);
  EXPECT_GT(m[3], 8u);
  EXPECT_NE(plans[1].directive().reason().find("also rank 5 of another event x1.40"),
            std::string::npos)
      << plans[1].directive().reason();
  EXPECT_EQ(std::vector<uint32_t>(job.micro_batches().begin(), job.micro_batches().end()),
            std::vector<uint32_t>(m.begin(), m.end()));
  // The metrics count both as active.
  EXPECT_EQ(ActiveGauge(), 2);

  // Rank 5 recovers: event 1 ends and hands the plan over; event 2 plans for rank 2 alone.
  RunModel(200, 290, slow);
  events = EventsOldestFirst();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].state(), falcon::v1::EVENT_STATE_RECOVERED) << events[0].DebugString();
  EXPECT_EQ(events[1].state(), falcon::v1::EVENT_STATE_MITIGATING) << events[1].DebugString();
  const falcon::v1::Action& handed = events[0].actions(events[0].actions_size() - 1);
  EXPECT_TRUE(handed.revert());
  EXPECT_NE(handed.reason().find("handed over to event"), std::string::npos) << handed.reason();
  plans = Plans();
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[2].event_id(), second.event_id());
  const auto& alone = plans[2].directive().micro_batch_plan().micro_batches();
  ASSERT_EQ(alone.size(), 4);
  EXPECT_GE(alone[1], 8u) << plans[2].directive().reason();
  EXPECT_LT(alone[2], 8u) << plans[2].directive().reason();
  EXPECT_EQ(ActiveGauge(), 1);
}

// Localization that takes long (30 profiled iterations) and a slowdown of every rank that is gone
// before it ends: the event closes as transient, no pause is sent, and a fault that follows opens
// its own event and is localized.
class SlowLocalizationTest : public OrchestratorTest {
 protected:
  static ControllerOptions Options() {
    ControllerOptions o;
    o.localization.profiling_iterations = 30;
    return o;
  }
  SlowLocalizationTest() : OrchestratorTest(Options()) {}
};

TEST_F(SlowLocalizationTest, ASlowdownGoneBeforeTheVerdictClosesAsTransientWithoutAPause) {
  // Rank 5 slow for 15 iterations (a slowdown of every rank alike would be an environment shift
  // and open no event: docs/algorithms.md#environment-shifts).
  Run(0, 110, [](int64_t i) { return i >= 60 && i < 75; });
  std::vector<falcon::v1::Event> events = EventsOldestFirst();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_CLOSED) << e.DebugString();
  EXPECT_TRUE(e.transient()) << e.DebugString();
  EXPECT_EQ(e.verdict_iteration(), -1);
  EXPECT_NE(e.transitions(e.transitions_size() - 1).reason().find("transient: "), std::string::npos)
      << e.DebugString();
  for (const auto& d : c_->directives().List(spec_.job, 0)) {
    EXPECT_FALSE(d.directive().has_pause()) << d.DebugString();
  }
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_TRACKING);
  EXPECT_EQ(ActiveGauge(), 0);

  // Detection is free at once: a fault that follows gets its own event and verdict.
  Run(110, 220, [](int64_t i) { return i >= 130; });
  events = EventsOldestFirst();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].cause(), falcon::v1::CAUSE_COMPUTE) << events[1].DebugString();
  EXPECT_EQ(std::vector<uint32_t>(events[1].ranks().begin(), events[1].ranks().end()),
            std::vector<uint32_t>{5});
}

// Outside load slows every rank alike, compute included, from iteration 60 (and stays); rank 5
// turns slow at 120. The load is an environment shift and opens no event
// (docs/algorithms.md#environment-shifts); the fault opens one, localized to rank 5.
TEST_F(OrchestratorTest, OutsideLoadBeforeAFaultDoesNotHideTheFault) {
  auto load = [](int64_t i) -> int64_t { return i >= 60 ? 40'000'000 : 0; };
  Run(
      0, 200, [](int64_t i) { return i >= 120; }, load);
  std::vector<falcon::v1::Event> events = EventsOldestFirst();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].cause(), falcon::v1::CAUSE_COMPUTE) << events[0].DebugString();
  EXPECT_EQ(std::vector<uint32_t>(events[0].ranks().begin(), events[0].ranks().end()),
            std::vector<uint32_t>{5});
  EXPECT_GE(events[0].onset_iteration(), 120);
  EXPECT_GE(common::testing::SeriesValue(registry_.Collect(), metrics::kEnvironmentShifts.name,
                                         {{"job", spec_.job}})
                .value_or(0),
            1);
}

}  // namespace
}  // namespace falcon::controller::mitigation
