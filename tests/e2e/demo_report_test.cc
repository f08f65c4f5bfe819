// Runs falcon_demo itself (the binary `./falcon demo` runs) on a short compute or link scenario
// on the netns cluster, with the faults applied from outside the job by the kernel fault driver
// (a cgroup CPU quota on one rank; a tc bandwidth cap from one node to another), and checks
// report.json (scored against the driver's ground truth), the folder's files and --json-report:
// the path outside checks use. Needs root with CAP_NET_ADMIN (skipped elsewhere, failed under
// CI=true).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/require_netns.h"
#include "tests/testing/skip.h"

namespace {

// --scenario=NAME from the command line (BUILD args): compute or link.
std::string g_scenario = "compute";

const std::string& Scenario() { return g_scenario; }

// The demo's exit code (128 + signal when killed); -1, with the error on stderr, when it cannot be
// spawned or waited for.
int RunDemo(const std::vector<std::string>& args) {
  falcon::common::SpawnOptions options;
  options.argv = args;
  absl::StatusOr<falcon::common::Subprocess> demo = falcon::common::Subprocess::Spawn(options);
  absl::StatusOr<falcon::common::ExitStatus> ended = demo.ok() ? demo->Wait() : demo.status();
  if (!ended.ok()) {
    std::cerr << ended.status() << "\n";
    return -1;
  }
  return ended->ShellCode();
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

TEST(DemoReport, ScenarioIsDetectedLocalizedAndMitigated) {
  FALCON_REQUIRE_NETNS();
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  const std::string out = std::string(outputs != nullptr ? outputs : tmp.c_str()) + "/report";
  const std::string copy = tmp + "/copy/report.json";
  std::filesystem::create_directories(tmp + "/copy");
  // --iterations fixes the run's length; --duration only sets the demo's deadline (1.5x + 30 s):
  // 120 s leaves a run slowed down by outside load (~100 s idle) room to finish.
  int rc = RunDemo({"deploy/demo/falcon_demo", "--scenario=" + Scenario(), "--cluster=netns",
                    "--iterations=330", "--duration=120s", "--emulated_compute_ms=3",
                    "--out=" + out, "--json-report=" + copy});
  ASSERT_EQ(rc, 0);
  for (const char* f : {"report.json", "iterations.csv", "timeline.png", "index.html"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
  nlohmann::json j = ReadJson(out + "/report.json");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(ReadJson(copy), j) << "--json-report must be a copy of report.json";
  EXPECT_EQ(j["false_alarms"], 0) << j.dump(2);
  EXPECT_TRUE(j["missed_faults"].empty()) << j.dump(2);
  ASSERT_EQ(j["injected_faults"].size(), 1u);
  const nlohmann::json& fault = j["injected_faults"][0];
  // The event matched to the fault. Others may precede it, from the shared machine's noise: an
  // unexplained slowdown (no culprit, nothing mitigated) or one rank slowed by outside load that
  // cleared by itself before any mitigation; neither is a false alarm (asserted above).
  const nlohmann::json* matched = nullptr;
  for (const nlohmann::json& ev : j["events"]) {
    if (ev.contains("matched_fault") && ev["matched_fault"] == 0) {
      matched = &ev;
      break;
    }
  }
  ASSERT_NE(matched, nullptr) << "no event matched the fault: " << j.dump(2);
  const nlohmann::json& e = *matched;
  for (const nlohmann::json& ev : j["events"]) {
    if (&ev != matched && ev["matched_fault"].is_null()) {
      EXPECT_TRUE(ev["unexplained"].get<bool>() || ev["cleared_unmitigated"].get<bool>() ||
                  !ev["explained_by_event_id"].is_null())
          << j.dump(2);
    }
  }
  for (const char* key :
       {"cause", "ranks", "links", "onset_iteration", "alarm_iteration", "verdict_iteration",
        "actions", "iteration_time_healthy_s", "iteration_time_slow_s",
        "iteration_time_mitigated_s", "slowdown_recovered"}) {
    EXPECT_TRUE(e.contains(key)) << key;
  }
  EXPECT_EQ(e["matched_fault"], 0) << j.dump(2);
  EXPECT_GE(e["alarm_iteration"].get<int64_t>(), e["onset_iteration"].get<int64_t>());
  EXPECT_GE(e["verdict_iteration"].get<int64_t>(), e["alarm_iteration"].get<int64_t>());
  ASSERT_FALSE(e["actions"].empty()) << j.dump(2);
  if (Scenario() == "compute") {
    EXPECT_EQ(e["cause"], "COMPUTE");
    EXPECT_EQ(j["settings"]["fault_injection"], "kernel");
    ASSERT_EQ(e["ranks"].size(), 1u);
    EXPECT_EQ(e["ranks"][0], fault["rank"]);
    bool s2 = false;  // S1 (keep going) is recorded first; S2 follows once it pays off.
    for (const auto& a : e["actions"])
      s2 = s2 || (a["strategy"] == "S2" && !a["revert"].get<bool>() && !a["skipped"].get<bool>());
    EXPECT_TRUE(s2) << j.dump(2);
    // The demo leaves S2L off (DemoSettings): the event's ceiling is its S2 plan's, from the
    // controller's model (~0.75 of a x1.5 slowdown with 64 micro-batches in multiples of 2).
    EXPECT_EQ(e["ceiling_strategy"], "S2") << j.dump(2);
    EXPECT_GT(e["recoverable_ceiling"].get<double>(), 0.3) << j.dump(2);
    // S2 moves whole micro-batches off the slow DP group; the quota's slowdown of the rank is
    // noisy on 2 cores, and measured runs took back 0.69 (the in-process fault: 0.47-0.86). 0.3
    // still fails a plan that does nothing (0) or sheds from the wrong group (< 0).
    EXPECT_GE(e["slowdown_recovered"].get<double>(), 0.3) << j.dump(2);
  } else {
    EXPECT_EQ(e["cause"], "COMMUNICATION");
    ASSERT_GE(e["links"].size(), 1u);
    // The cap slows one direction from one node to another: every rank link that runs that way
    // is slow, and the verdict names those links, in that direction only (the report's
    // culprit_correct / link_direction_correct compare node pairs for kernel faults).
    EXPECT_TRUE(e["culprit_correct"].get<bool>()) << j.dump(2);
    EXPECT_TRUE(e["link_direction_correct"].get<bool>()) << j.dump(2);
    EXPECT_EQ(j["settings"]["fault_injection"], "kernel");
    ASSERT_TRUE(j.contains("ground_truth")) << j.dump(2);
    bool s3 = false;
    for (const auto& a : e["actions"]) s3 = s3 || a["strategy"] == "S3";
    EXPECT_TRUE(s3) << j.dump(2);
  }
  EXPECT_GT(e["iteration_time_slow_s"].get<double>(), e["iteration_time_healthy_s"].get<double>());
  if (HasFailure()) {  // The evidence: the run's iteration-time series (report.json is above).
    std::ifstream csv(out + "/iterations.csv");
    std::stringstream ss;
    ss << csv.rdbuf();
    std::cerr << "iterations.csv:\n" << ss.str();
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--scenario=", 0) == 0) g_scenario = a.substr(11);
  }
  return RUN_ALL_TESTS();
}
