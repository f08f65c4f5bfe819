// The scenario suite: real multi-process runs (controller with RocksDB, one agent per
// emulated node, the reference trainer on Gloo) through deploy/demo's runner, checked on the
// report the demo would write. Each target runs one scenario (--gtest_filter in BUILD).
//
// The compute -> S2, link -> S3, clears -> revert and restart-with-pending-directive tests
// live beside the controller's mitigation; demo_report_test covers compute and link through
// falcon_demo's report.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_join.h"
#include "deploy/demo/local_cluster_runner.h"
#include "deploy/demo/report_files.h"
#include "deploy/demo/runner.h"
#include "gtest/gtest.h"

namespace falcon::demo {
namespace {

// Runs scenario `name` on DP=4 x PP=2, 4 nodes, `iterations` steps; writes the report folder to
// the test's undeclared outputs for inspection.
Report RunScenarioNamed(const std::string& name, int64_t iterations) {
  absl::StatusOr<Scenario> scenario = MakeScenario(name, Layout{4, 2}, 4, iterations);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  RunOptions options;
  options.scenario = *scenario;
  options.job = "e2e-" + name;
  options.emulated_compute_ms = 3;  // As the demo: less relative noise than 2 ms.
  options.time_limit = absl::Seconds(115);
  options.settings = DemoSettings();
  // Empty work dir: LocalCluster makes a fresh one (short enough for the agents' sockets).
  options.live = [](const std::string& line) { std::cerr << line << "\n"; };
  absl::StatusOr<Report> report = RunScenario(options, LocalClusterFactory());
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return Report();
  std::cerr << SummaryText(*report);
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs != nullptr) {
    absl::Status s = WriteReportFolder(*report, std::string(outputs) + "/" + name);
    if (!s.ok()) std::cerr << "report folder: " << s << "\n";
  }
  return *std::move(report);
}

// The run reached most of its iterations (the checks below are about a real run).
void ExpectRan(const Report& r) {
  ASSERT_FALSE(r.history.empty());
  EXPECT_GE(r.history.back().iteration(), r.scenario.iterations * 8 / 10) << r.note;
}

TEST(Scenario, HealthyRunRaisesNoEvent) {
  Report r = RunScenarioNamed("healthy", 280);
  ExpectRan(r);
  EXPECT_TRUE(r.events.empty()) << SummaryText(r);
  EXPECT_EQ(r.false_alarms, 0);
}

TEST(Scenario, TransientBlipIsIgnored) {
  Report r = RunScenarioNamed("blip", 280);
  ExpectRan(r);
  EXPECT_TRUE(r.events.empty()) << SummaryText(r);
  EXPECT_EQ(r.false_alarms, 0);
}

TEST(Scenario, CpuContentionIsDetectedAsCompute) {
  Report r = RunScenarioNamed("contention", 330);
  ExpectRan(r);
  const InjectedFault& f = r.scenario.faults[0];
  auto it = std::find_if(r.events.begin(), r.events.end(),
                         [](const EventReport& e) { return e.matched_fault == 0; });
  ASSERT_NE(it, r.events.end()) << SummaryText(r);
  EXPECT_EQ(it->cause, "COMPUTE") << SummaryText(r);
  EXPECT_NE(std::find(it->ranks.begin(), it->ranks.end(), f.rank), it->ranks.end())
      << SummaryText(r);
  EXPECT_EQ(r.false_alarms, 0) << SummaryText(r);
}

TEST(Scenario, ControllerRestartLosesNoEventAndDuplicatesNone) {
  Report r = RunScenarioNamed("restart", 330);
  ExpectRan(r);
  // The restart happened after the event was raised (otherwise the test checks nothing).
  ASSERT_FALSE(r.event_ids_before_restart.empty()) << SummaryText(r);
  for (uint64_t id : r.event_ids_before_restart) {
    EXPECT_NE(std::find(r.event_ids_at_end.begin(), r.event_ids_at_end.end(), id),
              r.event_ids_at_end.end())
        << "event " << id
        << " lost across the restart; at end: " << absl::StrJoin(r.event_ids_at_end, ",");
  }
  int matching = 0;
  for (const EventReport& e : r.events) matching += e.matched_fault == 0 ? 1 : 0;
  EXPECT_EQ(matching, 1) << "one fault, one event\n" << SummaryText(r);
  EXPECT_EQ(r.false_alarms, 0) << SummaryText(r);
  EXPECT_TRUE(r.missed_faults.empty());
  for (const EventReport& e : r.events) {
    if (e.matched_fault != 0) continue;
    // Alarm and verdict survive the restart (stored in RocksDB), each recorded once. (Whether the
    // verdict is right is the compute scenarios' business, not this test's.)
    EXPECT_GE(e.alarm_iteration, e.onset_iteration);
    EXPECT_GE(e.verdict_iteration, e.alarm_iteration);
    EXPECT_NE(e.cause, "UNSPECIFIED") << SummaryText(r);
  }
}

}  // namespace
}  // namespace falcon::demo
