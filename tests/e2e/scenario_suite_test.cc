// The scenario suite: real multi-process runs (controller with RocksDB, one agent per
// emulated node, the reference trainer on Gloo) through deploy/demo's runner, checked on the
// report the demo would write. Each target runs one scenario (--gtest_filter in BUILD). Those on
// the netns cluster (every node a network namespace of its own, the faults applied from outside
// the job by the kernel fault driver and scored against its ground truth) need root with
// CAP_NET_ADMIN (skipped elsewhere, failed under CI=true). healthy, blip and restart still run on
// loopback with the faults inside the trainer: on the netns cluster they raised false alarms in 2
// of 4 runs (a COMPUTE event on rank 7 in a healthy stretch; a transient under outside load) that
// are not understood yet.
//
// The compute -> S2, link -> S3, clears -> revert and restart-with-pending-directive tests are
// mitigation_e2e_test; demo_report_test covers compute and link through falcon_demo's report.
// A failed assertion prints the report's summary and the job's iteration-time series.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_join.h"
#include "cluster/netns.h"
#include "deploy/demo/local_cluster_runner.h"
#include "deploy/demo/report_files.h"
#include "deploy/demo/runner.h"
#include "gtest/gtest.h"
#include "tests/e2e/evidence.h"
#include "tests/harness/local_cluster.h"
#include "tests/testing/skip.h"

namespace falcon::tests::e2e {
namespace {

// Runs scenario `name` on DP=4 x PP=2, 4 nodes, `iterations` steps; writes the report folder to
// the test's undeclared outputs for inspection.
deploy::demo::Report RunScenarioNamed(
    const std::string& name, int64_t iterations,
    deploy::demo::FaultInjection injection = deploy::demo::FaultInjection::kKernel) {
  absl::StatusOr<deploy::demo::Scenario> scenario =
      MakeScenario(name, deploy::demo::Layout{4, 2}, 4, iterations, injection);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  deploy::demo::RunOptions options;
  options.scenario = *scenario;
  options.job = "e2e-" + name;
  options.emulated_compute_ms = 3;  // As the demo: less relative noise than 2 ms.
  // A deadline, not a measurement: ~70 s on an idle 2-core machine; outside load slows the run,
  // and ExpectRan needs 80% of the iterations.
  options.time_limit = absl::Seconds(240);
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

// Stops the test (skip, or failure under CI=true) where namespaces cannot be made.
#define REQUIRE_NETNS()                                                   \
  do {                                                                    \
    if (absl::Status s = falcon::cluster::CheckNetnsSupport(); !s.ok()) { \
      FALCON_SKIP_OR_FAIL(std::string(s.message()));                      \
    }                                                                     \
  } while (0)

// The report's summary and the job's iteration-time series: what a failed assertion prints.
std::string Evidence(const deploy::demo::Report& r) {
  return SummaryText(r) + falcon::tests::e2e::FormatSeries(r.history);
}

// The run reached most of its iterations (the checks below are about a real run).
void ExpectRan(const deploy::demo::Report& r) {
  ASSERT_FALSE(r.history.empty());
  EXPECT_GE(r.history.back().iteration(), r.scenario.iterations * 8 / 10) << r.note << "\n"
                                                                          << Evidence(r);
}

TEST(Scenario, HealthyRunRaisesNoEvent) {
  deploy::demo::Report r =
      RunScenarioNamed("healthy", 280, deploy::demo::FaultInjection::kInProcess);
  ExpectRan(r);
  EXPECT_TRUE(r.events.empty()) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
}

TEST(Scenario, TransientBlipIsIgnored) {
  deploy::demo::Report r = RunScenarioNamed("blip", 280, deploy::demo::FaultInjection::kInProcess);
  ExpectRan(r);
  EXPECT_TRUE(r.events.empty()) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
}

TEST(Scenario, CpuContentionIsDetectedAsCompute) {
  REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("contention", 330);
  ExpectRan(r);
  const deploy::demo::InjectedFault& f = r.scenario.faults[0];
  auto it = std::find_if(r.events.begin(), r.events.end(),
                         [](const deploy::demo::EventReport& e) { return e.matched_fault == 0; });
  ASSERT_NE(it, r.events.end()) << Evidence(r);
  EXPECT_EQ(it->cause, "COMPUTE") << Evidence(r);
  EXPECT_NE(std::find(it->ranks.begin(), it->ranks.end(), f.rank), it->ranks.end()) << Evidence(r);
  EXPECT_EQ(r.false_alarms, 0) << Evidence(r);
}

TEST(Scenario, ControllerRestartLosesNoEventAndDuplicatesNone) {
  deploy::demo::Report r =
      RunScenarioNamed("restart", 330, deploy::demo::FaultInjection::kInProcess);
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
  REQUIRE_NETNS();
  deploy::demo::Report r = RunScenarioNamed("dp-link", 330);
  ExpectRan(r);
  auto it = std::find_if(r.events.begin(), r.events.end(),
                         [](const deploy::demo::EventReport& e) { return e.matched_fault == 0; });
  ASSERT_NE(it, r.events.end()) << Evidence(r);
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

}  // namespace
}  // namespace falcon::tests::e2e
