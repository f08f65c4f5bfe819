// The scenario suite: real multi-process runs (controller with RocksDB, one agent per
// emulated node, the reference trainer on Gloo) through deploy/demo's runner, checked on the
// report the demo would write. Each target runs one scenario (--gtest_filter in BUILD), on the
// netns cluster (every node a network namespace of its own, the faults applied from outside the
// job by the kernel fault driver and scored against its ground truth): they need root with
// CAP_NET_ADMIN (skipped elsewhere, failed under CI=true).
//
// healthy and blip blame and mitigate nothing; nic (a degraded NIC named as its node), clears
// (manual: a compute fault whose S2 plan is reverted once it clears; its one run raised a second
// event right after the quota's removal, under the S2 plan, not yet explained), nic-s4 (a
// crawling NIC until S4 restarts the job without its node), dp_link and controller_restart.
// healthy, nic and controller_restart are "manual" targets (BUILD says what covers them in
// `./falcon test`).
// mitigation_e2e_test drives its own runs (joint S2, a cleared fault's revert, a restart with a
// pending directive); demo_report_test covers compute and link through falcon_demo's report. A
// failed assertion prints the report's summary and the job's iteration-time series.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "deploy/demo/local_cluster_runner.h"
#include "deploy/demo/report_files.h"
#include "deploy/demo/runner.h"
#include "gtest/gtest.h"
#include "tests/e2e/evidence.h"
#include "tests/harness/local_cluster.h"
#include "tests/testing/require_netns.h"

namespace falcon::tests::e2e {
namespace {

// Runs scenario `name` on DP=4 x PP=2, 4 nodes, `iterations` steps; writes the report folder to
// the test's undeclared outputs for inspection.
deploy::demo::Report RunScenarioNamed(
    const std::string& name, int64_t iterations,
    deploy::demo::FaultInjection injection = deploy::demo::FaultInjection::kKernel,
    absl::Duration time_limit = absl::Seconds(240)) {
  absl::StatusOr<deploy::demo::Scenario> scenario =
      MakeScenario(name, deploy::demo::Layout{4, 2}, 4, iterations, injection);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  deploy::demo::RunOptions options;
  options.scenario = *scenario;
  options.job = "e2e-" + name;
  options.emulated_compute_ms = 3;  // As the demo: less relative noise than 2 ms.
  // A deadline, not a measurement: ~70 s on an idle 2-core machine; outside load slows the run,
  // and ExpectRan needs 80% of the iterations.
  options.time_limit = time_limit;
  options.settings = deploy::demo::DemoSettings();
  // The paper's 10% threshold, as the demo: outside load on a loaded 2-core machine (bursts of
  // 10-46% for up to ~40 iterations, every rank alike) is an environment shift and opens no event.
  options.settings.set_verification_min_ratio(
      falcon::tests::harness::TunedSettings().verification_min_ratio());
  // Empty work dir: LocalCluster makes a fresh one (short enough for the agents' sockets).
  options.live = [](const std::string& line) { std::cerr << line << "\n"; };
  absl::StatusOr<deploy::demo::Report> report =
      RunScenario(options, deploy::demo::LocalClusterFactory());
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return deploy::demo::Report();
  std::cerr << SummaryText(*report);
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs != nullptr) {
    absl::Status s = WriteReportFolder(*report, std::string(outputs) + "/" + name);
    if (!s.ok()) std::cerr << "report folder: " << s << "\n";
  }
  return *std::move(report);
}

// The report's summary and the job's iteration-time series: what a failed assertion prints.
std::string Evidence(const deploy::demo::Report& r) {
  return SummaryText(r) + falcon::tests::e2e::FormatSeries(r.history);
}

// The event matched to the scenario's first fault (report.h), nullptr when none is.
const deploy::demo::EventReport* EventOfFirstFault(const deploy::demo::Report& r) {
  auto it = std::find_if(r.events.begin(), r.events.end(),
                         [](const deploy::demo::EventReport& e) { return e.matched_fault == 0; });
  return it == r.events.end() ? nullptr : &*it;
}

// The run reached most of its iterations (the checks below are about a real run).
void ExpectRan(const deploy::demo::Report& r) {
  ASSERT_FALSE(r.history.empty());
  EXPECT_GE(r.history.back().iteration(), r.scenario.iterations * 8 / 10) << r.note << "\n"
                                                                          << Evidence(r);
}

// A healthy run (and one with a 5% x1.05 blip) on the netns cluster raises no false alarm: it
// mitigates nothing, and names no culprit during the blip. Load from outside the job on the shared
// machine can still slow the job x1.1-1.3 for tens of iterations. Where validation then finds no
// culprit, the event is an unexplained slowdown (seen in CI: x1.13 on one node's ranks for 25
// iterations); where it measured one rank slow (a real compute slowdown: CPU contention is one of
// the paper's causes) and the rank cleared before any mitigation, a cleared slowdown (seen in CI:
// rank 1 x1.08 for 7 iterations, 80 iterations before the blip). Neither is a false alarm
// (report.h); both are printed. A culprit still named at the end, one mitigated, or one named
// during the blip is.
void ExpectNoFalseAlarm(const deploy::demo::Report& r) {
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
  for (const deploy::demo::EventReport& e : r.events) {
    EXPECT_TRUE(e.unexplained || e.cleared_unmitigated || e.explained_by_event_id != 0)
        << Evidence(r);
    EXPECT_FALSE(deploy::demo::Mitigated(e)) << Evidence(r);
  }
  if (r.unexplained_slowdowns > 0 || r.cleared_slowdowns > 0) {
    std::cerr << "outside load: " << r.unexplained_slowdowns
              << " unexplained slowdown(s) (nothing blamed), " << r.cleared_slowdowns
              << " cleared by themselves (nothing mitigated)\n";
  }
}

TEST(Scenario, HealthyRunRaisesNoFalseAlarm) {
  FALCON_REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("healthy", 280);
  ExpectRan(r);
  ExpectNoFalseAlarm(r);
}

TEST(Scenario, TransientBlipIsIgnored) {
  FALCON_REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("blip", 280);
  ExpectRan(r);
  ExpectNoFalseAlarm(r);
}

TEST(Scenario, CpuContentionIsDetectedAsCompute) {
  FALCON_REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("contention", 330);
  ExpectRan(r);
  const deploy::demo::InjectedFault& f = r.scenario.faults[0];
  const deploy::demo::EventReport* it = EventOfFirstFault(r);
  ASSERT_NE(it, nullptr) << Evidence(r);
  EXPECT_EQ(it->cause, "COMPUTE") << Evidence(r);
  EXPECT_NE(std::find(it->ranks.begin(), it->ranks.end(), f.rank), it->ranks.end()) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
}

TEST(Scenario, ControllerRestartLosesNoEventAndDuplicatesNone) {
  FALCON_REQUIRE_NETNS();
  // On the netns cluster with the kernel fault driver: inside the trainer, a x1.5 compute fault
  // on 3 ms of emulated device time per micro-batch moved the iteration time only ~x1.1 and
  // was not verified at the 10% threshold (no event in 2 of 2 runs).
  deploy::demo::Report r = RunScenarioNamed("restart", 330);
  ExpectRan(r);
  // The restart happened after the event was raised (otherwise the test checks nothing).
  ASSERT_FALSE(r.event_ids_before_restart.empty()) << Evidence(r);
  for (uint64_t id : r.event_ids_before_restart) {
    EXPECT_NE(std::find(r.event_ids_at_end.begin(), r.event_ids_at_end.end(), id),
              r.event_ids_at_end.end())
        << "event " << id
        << " lost across the restart; at end: " << absl::StrJoin(r.event_ids_at_end, ",");
  }
  int matching = 0;
  for (const deploy::demo::EventReport& e : r.events) matching += e.matched_fault == 0 ? 1 : 0;
  EXPECT_EQ(matching, 1) << "one fault, one event\n" << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
  EXPECT_TRUE(r.missed_faults.empty()) << Evidence(r);
  for (const deploy::demo::EventReport& e : r.events) {
    if (e.matched_fault != 0) continue;
    // Alarm and verdict survive the restart (stored in RocksDB), each recorded once. (Whether the
    // verdict is right is the compute scenarios' business, not this test's.)
    EXPECT_GE(e.alarm_iteration, e.onset_iteration) << Evidence(r);
    EXPECT_GE(e.verdict_iteration, e.alarm_iteration) << Evidence(r);
    EXPECT_NE(e.cause, "UNSPECIFIED") << Evidence(r);
  }
}

TEST(Scenario, DpLinkCapIsLocalizedToItsNodePairAndMitigated) {
  FALCON_REQUIRE_NETNS();
  // 250 iterations: the cap from it 75 leaves ~160 for the verdict and S3 (the demo's 330 took
  // ~40 s longer in CI for nothing this test checks).
  deploy::demo::Report r = RunScenarioNamed("dp-link", 250);
  ExpectRan(r);
  const deploy::demo::EventReport* it = EventOfFirstFault(r);
  ASSERT_NE(it, nullptr) << Evidence(r);
  EXPECT_EQ(it->cause, "COMMUNICATION") << Evidence(r);
  // Every link named runs from the capped node to the other (report.h: node pairs for kernel
  // faults), in that direction.
  EXPECT_TRUE(it->culprit_correct) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
  bool mitigated = false;
  for (const deploy::demo::ActionMark& a : it->actions) {
    mitigated =
        mitigated || (!a.revert && !a.skipped && (a.strategy == "S2" || a.strategy == "S3"));
  }
  EXPECT_TRUE(mitigated) << Evidence(r);
}

// A node's whole NIC degraded both ways (tbf on its interface and its host-side veth): the
// verdict names that node's NIC, not the N links through it one by one.
TEST(Scenario, DegradedNicIsNamedAsItsNode) {
  FALCON_REQUIRE_NETNS();
  // 220 iterations: the NIC degraded from it 66 (each iteration ~2x slower then) leaves ~140 for
  // the verdict, which comes within ~20 (330 took 215 s in CI).
  deploy::demo::Report r = RunScenarioNamed("nic", 220);
  ExpectRan(r);
  const deploy::demo::EventReport* it = EventOfFirstFault(r);
  ASSERT_NE(it, nullptr) << Evidence(r);
  EXPECT_EQ(it->cause, "COMMUNICATION") << Evidence(r);
  EXPECT_EQ(it->nodes, std::vector<std::string>{"node" + std::to_string(r.scenario.faults[0].node)})
      << Evidence(r);
  EXPECT_TRUE(it->culprit_correct) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
}

// A x1.5 CPU quota on one rank's device from 25% to 60% of the run: S2 while it lasts, and the
// plan reverted once the probe sees the rank healthy again, before the run ends.
TEST(Scenario, AFaultThatClearsHasItsPlanReverted) {
  FALCON_REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("clears", 330);
  ExpectRan(r);
  const deploy::demo::InjectedFault& f = r.scenario.faults[0];
  const deploy::demo::EventReport* it = EventOfFirstFault(r);
  ASSERT_NE(it, nullptr) << Evidence(r);
  EXPECT_EQ(it->cause, "COMPUTE") << Evidence(r);
  EXPECT_TRUE(it->culprit_correct) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
  const deploy::demo::ActionMark* s2 = nullptr;
  const deploy::demo::ActionMark* revert = nullptr;
  for (const deploy::demo::ActionMark& a : it->actions) {
    if (a.strategy != "S2" || a.skipped || a.dry_run) continue;
    if (!a.revert && s2 == nullptr) s2 = &a;
    if (a.revert) revert = &a;
  }
  ASSERT_NE(s2, nullptr) << Evidence(r);
  ASSERT_NE(revert, nullptr) << Evidence(r);
  // The plan held while the fault lasted (no flapping: the device stays slow under S2) and went
  // once it cleared.
  EXPECT_GE(revert->iteration, f.to_iteration) << Evidence(r);
  EXPECT_FALSE(revert->after_end) << Evidence(r);
  EXPECT_EQ(it->state, "RECOVERED") << Evidence(r);
}

// node2's NIC crawls (0.25 Mbit/s both ways) from 20% of the run to its end: the verdict names
// node2's NIC, S3 finds no better layout (each stage's DP communicator spans two nodes) and is
// skipped, and S4 restarts the job from its checkpoint without node2's ranks 4 and 5 (DP=3 x PP=2
// on the survivors, which stay on their nodes); training goes on at about its healthy speed to
// the end.
TEST(Scenario, CrawlingNicIsRestartedWithoutItsNodeAndTrainingGoesOn) {
  FALCON_REQUIRE_NETNS();
  // ~240 s on an idle 2-core machine (a validation of ~30 s through the crawling NIC, about ten
  // iterations at ~3.6 s); the deadline leaves room for outside load.
  deploy::demo::Report r =
      RunScenarioNamed("nic-s4", 260, deploy::demo::FaultInjection::kKernel, absl::Seconds(480));
  ExpectRan(r);
  const deploy::demo::EventReport* it = EventOfFirstFault(r);
  ASSERT_NE(it, nullptr) << Evidence(r);
  EXPECT_EQ(it->cause, "COMMUNICATION") << Evidence(r);
  EXPECT_EQ(it->nodes, std::vector<std::string>{"node2"}) << Evidence(r);
  EXPECT_TRUE(it->culprit_correct) << Evidence(r);
  EXPECT_TRUE(r.missed_faults.empty()) << Evidence(r);

  // The ladder: S3 judged and skipped (no directive), then S4 within the run.
  bool s3_skipped = false;
  const deploy::demo::ActionMark* s4 = nullptr;
  for (const deploy::demo::ActionMark& a : it->actions) {
    if (a.strategy == "S3") {
      EXPECT_TRUE(a.skipped) << "no layout keeps node2's NIC out of a DP communicator\n"
                             << Evidence(r);
      s3_skipped = s3_skipped || a.skipped;
    }
    if (a.strategy == "S4" && !a.skipped && !a.dry_run) s4 = &a;
  }
  EXPECT_TRUE(s3_skipped) << Evidence(r);
  ASSERT_NE(s4, nullptr) << Evidence(r);
  EXPECT_FALSE(s4->after_end) << Evidence(r);
  EXPECT_EQ(it->state, "CLOSED") << Evidence(r);
  EXPECT_EQ(it->restart_iteration, s4->iteration) << Evidence(r);

  // The job the controller tracks at the end: the survivors at the new epoch, node2 left out.
  EXPECT_EQ(r.job_at_end.world_size, 6u) << Evidence(r);
  EXPECT_GE(r.job_at_end.epoch, 1u) << Evidence(r);
  EXPECT_EQ(r.job_at_end.dp, 3u) << Evidence(r);
  EXPECT_EQ(r.job_at_end.pp, 2u) << Evidence(r);
  std::vector<std::string> nodes;
  for (const auto& [node, ranks] : r.job_at_end.ranks_by_node) {
    nodes.push_back(node);
    EXPECT_EQ(ranks.size(), 2u) << node << "\n" << Evidence(r);
  }
  EXPECT_EQ(nodes, (std::vector<std::string>{"node0", "node1", "node3"})) << Evidence(r);

  // Training went on after the restart, far from the crawl (x10-14). Its speed is not compared
  // with the healthy baseline alone: 3 DP groups run the same global batch in (M / 3 + PP - 1)
  // 1F1B slots instead of (M / 4 + PP - 1) (x1.35 with 64 micro-batches), and outside load on the
  // shared cores moved it another x1.6 between the baseline and the end in one run.
  ASSERT_FALSE(r.history.empty());
  EXPECT_GE(r.history.back().iteration(), s4->iteration + 100) << Evidence(r);
  EXPECT_GT(it->iteration_time_mitigated_s, 0) << Evidence(r);
  EXPECT_LT(it->iteration_time_mitigated_s, it->iteration_time_slow_s / 3) << Evidence(r);
  ASSERT_TRUE(it->slowdown_recovered.has_value()) << Evidence(r);
  EXPECT_GE(*it->slowdown_recovered, 0.8) << Evidence(r);
  // Nothing else was mitigated: after the restart the job needs no plan.
  for (const deploy::demo::EventReport& e : r.events) {
    if (e.event_id == it->event_id) continue;
    for (const deploy::demo::ActionMark& a : e.actions) {
      EXPECT_TRUE(a.strategy == "S1" || a.skipped) << "event " << e.event_id << "\n" << Evidence(r);
    }
  }
}

}  // namespace
}  // namespace falcon::tests::e2e

// Each target selects one case with --gtest_filter (BUILD); a filter that matches no case (a
// renamed test) must fail the target, not pass it with 0 tests run.
int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::cerr << "no test case matches this target's --gtest_filter\n";
    return 1;
  }
  return rc;
}
