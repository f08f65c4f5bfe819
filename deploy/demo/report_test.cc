#include "deploy/demo/report.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "deploy/demo/report_files.h"
#include "gtest/gtest.h"

namespace falcon::deploy::demo {
namespace {

// History: 0.2 s healthy, 0.3 s in [100, 150), 0.22 s from the S2 at 150 to 300, 0.2 s after.
std::vector<falcon::v1::HistoryPoint> History(int n) {
  std::vector<falcon::v1::HistoryPoint> h;
  for (int i = n - 1; i >= 0; --i) {  // Reverse order on purpose.
    falcon::v1::HistoryPoint p;
    p.set_iteration(i);
    double t = 0.2;
    if (i >= 100 && i < 150) t = 0.3;
    if (i >= 150 && i < 300) t = 0.22;
    if (i == 120) t = 5.0;  // A validation pause: medians ignore it.
    p.set_iteration_time_ns(static_cast<int64_t>(t * 1e9));
    p.set_plan_version(i >= 150 ? 1 : 0);
    p.set_time_ns(1'000'000'000LL * i);
    h.push_back(p);
  }
  return h;
}

Scenario ComputeScenario() {
  absl::StatusOr<Scenario> s = MakeScenario("compute", Layout{4, 2}, 4, 400);
  EXPECT_TRUE(s.ok());
  s->faults[0].from_iteration = 100;
  s->faults[0].to_iteration = 300;
  return *s;
}

falcon::v1::Event ComputeEvent(uint64_t id, int64_t onset, uint32_t rank) {
  falcon::v1::Event e;
  e.set_event_id(id);
  e.set_state(falcon::v1::EVENT_STATE_RECOVERED);
  e.set_cause(falcon::v1::CAUSE_COMPUTE);
  e.add_ranks(rank);
  e.set_onset_iteration(onset);
  e.set_alarm_iteration(onset + 12);
  e.set_verdict_iteration(onset + 30);
  e.set_recovery_iteration(305);
  e.set_onset_time_ns(1'000'000'000LL * onset);
  e.set_alarm_time_ns(1'000'000'000LL * (onset + 12));
  auto* a = e.add_actions();
  a->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  a->set_iteration(150);
  a->set_directive_id(3);
  auto* skip = e.add_actions();  // A skipped rung: no directive, ignored by the windows.
  skip->set_strategy(falcon::v1::STRATEGY_S3_TOPOLOGY);
  skip->set_iteration(200);
  auto* r = e.add_actions();
  r->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  r->set_iteration(306);
  r->set_revert(true);
  r->set_directive_id(4);
  return e;
}

TEST(MedianTest, Windows) {
  auto h = History(400);
  EXPECT_DOUBLE_EQ(MedianIterationTime(h, 0, 100), 0.2);
  EXPECT_DOUBLE_EQ(MedianIterationTime(h, 100, 150), 0.3);
  EXPECT_DOUBLE_EQ(MedianIterationTime(h, 500, 600), 0);
}

TEST(ReportTest, MatchesComputeEventAndComputesRecovery) {
  Report r = BuildReport(ComputeScenario(), RunSettings(), History(400), {ComputeEvent(7, 101, 2)});
  ASSERT_EQ(r.history.size(), 400u);
  EXPECT_EQ(r.history.front().iteration(), 0);
  ASSERT_EQ(r.events.size(), 1u);
  const EventReport& e = r.events[0];
  EXPECT_EQ(e.matched_fault, 0);
  EXPECT_TRUE(e.cause_correct);
  EXPECT_TRUE(e.culprit_correct);
  EXPECT_EQ(e.alarm_delay_iterations, 12);
  EXPECT_DOUBLE_EQ(e.alarm_delay_s, 12.0);
  EXPECT_NEAR(e.iteration_time_healthy_s, 0.2, 1e-9);
  EXPECT_NEAR(e.iteration_time_slow_s, 0.3, 1e-9);
  EXPECT_NEAR(e.iteration_time_mitigated_s, 0.22, 1e-9);
  EXPECT_NEAR(e.slowdown_recovered, 0.8, 1e-6);
  EXPECT_EQ(r.false_alarms, 0);
  EXPECT_TRUE(r.missed_faults.empty());
}

TEST(ReportTest, WrongRankIsMatchedButNotCorrect) {
  Report r = BuildReport(ComputeScenario(), RunSettings(), History(400), {ComputeEvent(1, 101, 3)});
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].matched_fault, 0);
  EXPECT_FALSE(r.events[0].culprit_correct);
}

TEST(ReportTest, EventOutsideEveryFaultIsAFalseAlarmAndTheFaultIsMissed) {
  falcon::v1::Event e = ComputeEvent(3, 20, 2);
  e.set_recovery_iteration(40);
  e.clear_actions();
  Report r = BuildReport(ComputeScenario(), RunSettings(), History(400), {e});
  EXPECT_EQ(r.false_alarms, 1);
  ASSERT_EQ(r.missed_faults.size(), 1u);
  EXPECT_EQ(r.events[0].slowdown_recovered, 0);
  EXPECT_EQ(r.events[0].iteration_time_mitigated_s, 0);
  nlohmann::json j = ReportJson(r);
  EXPECT_EQ(j["false_alarms"], 1);
  EXPECT_EQ(j["false_alarm_event_ids"][0], 3);
}

TEST(ReportTest, EventStartingBeforeTheFaultIsAFalseAlarmEvenIfItSpansIt) {
  Report r = BuildReport(ComputeScenario(), RunSettings(), History(400), {ComputeEvent(1, 80, 2)});
  EXPECT_EQ(r.false_alarms, 1);
  EXPECT_EQ(r.missed_faults.size(), 1u);
}

TEST(ReportTest, BlipEventsAreFalseAlarms) {
  absl::StatusOr<Scenario> s = MakeScenario("blip", Layout{4, 2}, 4, 400);
  ASSERT_TRUE(s.ok());
  falcon::v1::Event e = ComputeEvent(1, s->faults[0].from_iteration, 2);
  Report r = BuildReport(*s, RunSettings(), History(400), {e});
  EXPECT_EQ(r.false_alarms, 1);
  EXPECT_TRUE(r.missed_faults.empty());
}

TEST(ReportTest, LinkCulpritEitherDirection) {
  absl::StatusOr<Scenario> s = MakeScenario("link", Layout{4, 2}, 4, 400);
  ASSERT_TRUE(s.ok());
  const InjectedFault& f = s->faults[0];
  falcon::v1::Event e;
  e.set_event_id(1);
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  auto* l = e.add_links();
  l->set_src_rank(f.dst_rank);
  l->set_dst_rank(f.src_rank);
  e.set_onset_iteration(f.from_iteration + 1);
  e.set_recovery_iteration(-1);
  Report r = BuildReport(*s, RunSettings(), History(400), {e});
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_TRUE(r.events[0].cause_correct);
  EXPECT_TRUE(r.events[0].culprit_correct);
  EXPECT_FALSE(r.events[0].link_direction_correct);
}

TEST(ReportTest, JsonHasTheContractFieldNames) {
  RunSettings settings;
  settings.scenario = "compute";
  Report r = BuildReport(ComputeScenario(), settings, History(400), {ComputeEvent(7, 101, 2)});
  nlohmann::json j = ReportJson(r);
  ASSERT_TRUE(j["events"].is_array());
  const nlohmann::json& e = j["events"][0];
  for (const char* key :
       {"cause", "ranks", "links", "onset_iteration", "alarm_iteration", "verdict_iteration",
        "actions", "iteration_time_healthy_s", "iteration_time_slow_s",
        "iteration_time_mitigated_s", "slowdown_recovered"}) {
    EXPECT_TRUE(e.contains(key)) << key;
  }
  EXPECT_EQ(e["cause"], "COMPUTE");
  EXPECT_EQ(e["ranks"][0], 2);
  EXPECT_EQ(e["actions"][0]["strategy"], "S2");
  EXPECT_EQ(e["actions"][0]["iteration"], 150);
  EXPECT_TRUE(j["false_alarms"].is_number_integer());
  EXPECT_EQ(j["injected_faults"][0]["kind"], "compute");
  EXPECT_EQ(j["settings"]["scenario"], "compute");
  std::string summary = SummaryText(r);
  EXPECT_NE(summary.find("80% of the slowdown recovered"), std::string::npos) << summary;
}

TEST(ReportFilesTest, CsvMarksAndFolder) {
  Report r = BuildReport(ComputeScenario(), RunSettings(), History(400), {ComputeEvent(7, 101, 2)});
  std::string csv = IterationsCsv(r);
  EXPECT_EQ(csv.rfind("iteration,iteration_time_s,plan_version,marks\n", 0), 0u);
  EXPECT_NE(csv.find("\n100,0.300000,0,fault_start:0\n"), std::string::npos);
  EXPECT_NE(csv.find("\n150,0.220000,1,S2:7\n"), std::string::npos);
  EXPECT_NE(csv.find("revert_S2:7"), std::string::npos);

  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/report";
  absl::Status s = WriteReportFolder(r, dir);
  ASSERT_TRUE(s.ok()) << s;
  for (const char* f : {"report.json", "iterations.csv", "timeline.png", "index.html"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  }
  EXPECT_GT(std::filesystem::file_size(dir + "/timeline.png"), 1000u);
  std::ifstream in(dir + "/report.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str());
  EXPECT_EQ(j["events"].size(), 1u);
  std::ifstream html(dir + "/index.html");
  std::stringstream hs;
  hs << html.rdbuf();
  EXPECT_NE(hs.str().find("<img src=\"timeline.png\""), std::string::npos);
}

}  // namespace
}  // namespace falcon::deploy::demo
