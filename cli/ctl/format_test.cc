// Rendering: tables, durations, enum names, proto JSON, settings parsing, the event timeline,
// directives' ack counts and the history CSV with event marks.
#include "cli/ctl/format.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "cli/ctl/history_csv.h"
#include "cli/ctl/render.h"
#include "cli/ctl/settings_kv.h"
#include "gtest/gtest.h"

namespace falcon::cli::ctl {
namespace {

TEST(Table, AlignsColumnsWithoutTrailingBlanks) {
  Table t({"ID", "NAME", "X"});
  t.Add({"1", "long-name", ""});
  t.Add({"123", "b"});
  EXPECT_EQ(t.Render(),
            "ID   NAME       X\n"
            "1    long-name\n"
            "123  b\n");
}

TEST(Format, Durations) {
  EXPECT_EQ(FormatDurationNs(0), "-");
  EXPECT_EQ(FormatDurationNs(12'300), "12.3 us");
  EXPECT_EQ(FormatDurationNs(100'900'000), "100.9 ms");
  EXPECT_EQ(FormatDurationNs(2'500'000'000), "2.500 s");
  EXPECT_EQ(FormatSeconds(0), "0 s");
  EXPECT_EQ(FormatSeconds(0.0056), "5.6 ms");
  EXPECT_EQ(FormatSeconds(12.14), "12.1 s");
  EXPECT_EQ(FormatSeconds(123.4), "2m 03.4s");
  EXPECT_EQ(FormatTimeNs(0), "-");
  EXPECT_EQ(FormatTimeNs(1'700'000'000'123'000'000), "2023-11-14 22:13:20.123");
  EXPECT_EQ(FormatIteration(-1), "-");
  EXPECT_EQ(FormatIteration(7), "7");
}

TEST(Format, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{1} << 50), "1.0 PiB");
  EXPECT_EQ(FormatBytes(~uint64_t{0}), "16.0 EiB");
}

TEST(Format, EnumNames) {
  EXPECT_EQ(JobStateName(falcon::v1::JOB_STATE_MITIGATING), "mitigating");
  EXPECT_EQ(EventStateName(falcon::v1::EVENT_STATE_RECOVERED), "recovered");
  EXPECT_EQ(CauseName(falcon::v1::CAUSE_COMMUNICATION), "communication");
  EXPECT_EQ(CauseName(falcon::v1::CAUSE_UNSPECIFIED), "-");
  EXPECT_EQ(StrategyName(falcon::v1::STRATEGY_S2_MICRO_BATCH), "S2 micro-batch");
  EXPECT_EQ(StrategyName(falcon::v1::STRATEGY_S2L_LAYER_SPLIT), "S2L layer split");
  EXPECT_EQ(StrategyShortName(falcon::v1::STRATEGY_S2L_LAYER_SPLIT), "S2L");
  EXPECT_EQ(StrategyShortName(falcon::v1::STRATEGY_S3_TOPOLOGY), "S3");
  EXPECT_EQ(StrategyShortName(falcon::v1::STRATEGY_UNSPECIFIED), "-");
  EXPECT_EQ(DirectiveStateName(falcon::v1::DirectiveRecord::STATE_TIMED_OUT), "timed_out");
}

TEST(Format, Culprit) {
  falcon::v1::Event e;
  EXPECT_EQ(Culprit(e), "-");
  e.add_ranks(5);
  EXPECT_EQ(Culprit(e), "rank 5");
  e.add_ranks(6);
  auto* l = e.add_links();
  l->set_src_rank(1);
  l->set_dst_rank(3);
  EXPECT_EQ(Culprit(e), "ranks 5,6 link 1->3");
}

TEST(Format, ANodeNicCulpritIsTheNodeNotItsLinks) {
  falcon::v1::Event e;
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  for (auto [src, dst] : {std::pair<uint32_t, uint32_t>{4, 6}, {6, 4}, {0, 4}}) {
    auto* l = e.add_links();
    l->set_src_rank(src);
    l->set_dst_rank(dst);
  }
  EXPECT_EQ(Culprit(e), "links 4->6,6->4,0->4");
  e.add_nodes("node2");
  EXPECT_EQ(Culprit(e), "node2's NIC (3 links)");
  e.add_nodes("node5");
  EXPECT_EQ(Culprit(e), "node2's NIC, node5's NIC (3 links)");
}

TEST(ToJson, NumbersEnumsAndEveryField) {
  falcon::v1::Event e;
  e.set_event_id(9'000'000'000'000ull);
  e.set_state(falcon::v1::EVENT_STATE_LOCALIZED);
  e.add_ranks(5);
  e.set_recovery_iteration(-1);
  e.add_actions()->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  nlohmann::json j = ToJson(e);
  EXPECT_EQ(j["event_id"], 9'000'000'000'000ull);  // A number, not a string.
  EXPECT_EQ(j["state"], "EVENT_STATE_LOCALIZED");
  EXPECT_EQ(j["ranks"], nlohmann::json::array({5}));
  EXPECT_EQ(j["recovery_iteration"], -1);
  EXPECT_EQ(j["lost_seconds"], 0.0);  // Defaults are present.
  EXPECT_EQ(j["actions"][0]["strategy"], "STRATEGY_S2_MICRO_BATCH");
  EXPECT_EQ(j["actions"][0]["dry_run"], false);
  falcon::v1::Settings s;
  s.set_dry_run(true);
  nlohmann::json sj = ToJson(s);
  EXPECT_EQ(sj["dry_run"], true);
  EXPECT_TRUE(sj["hazard"].is_null());  // Unset optional.
}

TEST(Settings, ParsesByFieldTypeAndNamesBadInput) {
  falcon::v1::Settings s;
  ASSERT_TRUE(ApplySetting("dry_run=on", &s).ok());
  ASSERT_TRUE(ApplySetting("hazard=0.01", &s).ok());
  ASSERT_TRUE(ApplySetting("min_gap_iterations=20", &s).ok());
  ASSERT_TRUE(ApplySetting("s3_enabled=false", &s).ok());
  EXPECT_TRUE(s.dry_run());
  EXPECT_DOUBLE_EQ(s.hazard(), 0.01);
  EXPECT_EQ(s.min_gap_iterations(), 20u);
  EXPECT_FALSE(s.s3_enabled());
  EXPECT_FALSE(s.has_s2_enabled());
  auto err = [&](const char* kv) { return std::string(ApplySetting(kv, &s).message()); };
  EXPECT_NE(err("turbo=1").find("'turbo'"), std::string::npos);
  EXPECT_NE(err("job=x").find("'job'"), std::string::npos);
  EXPECT_NE(err("dry_run=maybe").find("dry_run"), std::string::npos);
  EXPECT_NE(err("hazard=nan").find("hazard"), std::string::npos);
  EXPECT_NE(err("min_gap_iterations=-1").find("min_gap_iterations"), std::string::npos);
  EXPECT_NE(err("min_gap_iterations=99999999999").find("min_gap_iterations"), std::string::npos);
  EXPECT_NE(err("noequals").find("KEY=VALUE"), std::string::npos);
  EXPECT_EQ(SettingKeys().front(), "detection_enabled");
  auto rows = SettingRows(s);
  EXPECT_EQ(rows[0], (std::pair<std::string, std::string>{"detection_enabled", "(unset)"}));
}

falcon::v1::Event SampleEvent() {
  falcon::v1::Event e;
  e.set_event_id(3);
  e.set_job("j");
  e.set_state(falcon::v1::EVENT_STATE_RECOVERED);
  e.set_cause(falcon::v1::CAUSE_COMPUTE);
  e.add_ranks(5);
  e.set_slowdown_ratio(1.4);
  e.set_onset_iteration(60);
  e.set_alarm_iteration(63);
  e.set_verdict_iteration(65);
  e.set_recovery_iteration(100);
  e.set_onset_time_ns(1'700'000'000'000'000'000);
  e.set_alarm_time_ns(1'700'000'000'500'000'000);
  e.set_verdict_time_ns(1'700'000'001'000'000'000);
  e.set_recovery_time_ns(1'700'000'010'000'000'000);
  e.set_healthy_iteration_time_ns(100'000'000);
  e.set_slow_iteration_time_ns(140'000'000);
  e.set_mitigated_iteration_time_ns(105'000'000);
  e.set_lost_seconds(12.1);
  auto* a = e.add_actions();
  a->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  a->set_directive_id(7);
  a->set_iteration(70);
  a->set_time_ns(1'700'000'002'000'000'000);
  a->set_reason("lost 12.1 s >= S2 cost 10.0 s");
  auto* r = e.add_actions();
  r->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  r->set_revert(true);
  r->set_dry_run(true);
  r->set_iteration(101);
  return e;
}

TEST(Render, EventTimelineInIterationOrder) {
  const std::string out = RenderEvent(SampleEvent());
  EXPECT_TRUE(absl::StrContains(out, "healthy 100.0 ms, slow 140.0 ms, mitigated 105.0 ms"));
  EXPECT_TRUE(absl::StrContains(out, "lost 12.1 s"));
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  std::vector<std::string> whats;
  for (const auto& l : lines) {
    for (const char* w : {"onset", "alarm", "verdict", "action", "revert", "recovery"}) {
      if (absl::StrContains(l, absl::StrCat("  ", w, " "))) whats.push_back(w);
    }
  }
  EXPECT_EQ(whats, (std::vector<std::string>{"onset", "alarm", "verdict", "action", "recovery",
                                             "revert"}));
  EXPECT_TRUE(absl::StrContains(out, "+500.0 ms"));
  EXPECT_TRUE(absl::StrContains(out, "S2 micro-batch, directive 7: lost 12.1 s >= S2 cost 10.0 s"));
  EXPECT_TRUE(absl::StrContains(out, "S2 micro-batch, revert, dry-run"));
}

TEST(Render, TheVerdictSaysHowTheCulpritWasFound) {
  falcon::v1::Event e = SampleEvent();
  e.set_validation_pause_ns(420'000'000);
  EXPECT_TRUE(absl::StrContains(RenderEvent(e), "(validation paused the job 420.0 ms)"))
      << RenderEvent(e);
  e.set_validation_pause_ns(0);
  e.set_localized_from_profiling(true);
  EXPECT_TRUE(absl::StrContains(RenderEvent(e), "(from profiling, no pause)")) << RenderEvent(e);
  e.set_evidence(falcon::v1::EVIDENCE_PEER_TIMING);
  EXPECT_TRUE(absl::StrContains(RenderEvent(e), "(from peer timing, no pause)")) << RenderEvent(e);
}

TEST(Render, ANodeNicEventNamesTheNodeAndListsItsLinks) {
  falcon::v1::Event e = SampleEvent();
  e.set_cause(falcon::v1::CAUSE_COMMUNICATION);
  e.clear_ranks();
  e.add_nodes("node2");
  for (auto [src, dst] : {std::pair<uint32_t, uint32_t>{4, 6}, {6, 4}}) {
    auto* l = e.add_links();
    l->set_src_rank(src);
    l->set_dst_rank(dst);
  }
  const std::string out = RenderEvent(e);
  EXPECT_TRUE(absl::StrContains(out, "cause communication  culprit node2's NIC (2 links)")) << out;
  EXPECT_TRUE(
      absl::StrContains(out, "slow NIC of node node2: 2 slow links to other nodes: 4->6,6->4"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "communication, node2's NIC (2 links)")) << out;
  falcon::v1::ListEventsResponse events;
  *events.add_events() = e;
  EXPECT_TRUE(absl::StrContains(RenderEvents(events), "node2's NIC (2 links)"));
  EXPECT_TRUE(absl::StrContains(RenderWatchLine(e), "culprit node2's NIC (2 links)"));
}

TEST(Render, EventsJobsAndWatchLine) {
  falcon::v1::ListEventsResponse events;
  *events.add_events() = SampleEvent();
  const std::string table = RenderEvents(events);
  EXPECT_TRUE(absl::StartsWith(table, "ID  JOB  STATE      CAUSE    CULPRIT"));
  EXPECT_TRUE(absl::StrContains(table, "x1.40"));
  EXPECT_EQ(RenderEvents({}), "no events\n");
  falcon::v1::ListEventsResponse transient;
  falcon::v1::Event* closed = transient.add_events();
  *closed = SampleEvent();
  closed->set_state(falcon::v1::EVENT_STATE_CLOSED);
  closed->set_transient(true);
  EXPECT_TRUE(absl::StrContains(RenderEvents(transient), "  transient  "))
      << RenderEvents(transient);
  EXPECT_TRUE(absl::StrContains(RenderEvent(*closed), "state transient"));
  closed->set_transient(false);
  closed->set_explained_by_event_id(3);  // Another event's slowdown (concurrent events).
  EXPECT_TRUE(absl::StrContains(RenderEvents(transient), "  part-of-3  "))
      << RenderEvents(transient);
  EXPECT_EQ(RenderJobs({}), "no jobs\n");
  falcon::v1::Event e = SampleEvent();
  auto* t = e.add_transitions();
  t->set_state(falcon::v1::EVENT_STATE_RECOVERED);
  t->set_iteration(103);
  t->set_reason("back");
  const std::string line = RenderWatchLine(e);
  EXPECT_TRUE(absl::StrContains(line, "event 3  job j  recovered  iteration 103")) << line;
  EXPECT_TRUE(absl::StrContains(line, "(back)")) << line;
}

TEST(Render, JobShowsItsWorkloadImbalance) {
  falcon::v1::Job j;
  j.set_job("llm");
  EXPECT_NE(RenderJob(j).find("imbalance       not analysed yet"), std::string::npos)
      << RenderJob(j);
  falcon::v1::WorkloadImbalance* im = j.mutable_imbalance();
  im->set_iterations(63);
  im->add_findings("stage imbalance: stage 3 computes x1.63 the other stages' median");
  im->add_findings("data-dependent jitter: no rank is to blame");
  const std::string out = RenderJob(j);
  EXPECT_NE(out.find("imbalance (63 it)  stage imbalance: stage 3 computes x1.63"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\n                   data-dependent jitter"), std::string::npos) << out;
}

TEST(Render, JobShowsItsPipelineShapeAndTheLayerSplitInForce) {
  falcon::v1::Job j;
  j.set_job("llm");
  std::string out = RenderJob(j);
  EXPECT_EQ(out.find("blocks"), std::string::npos) << "unknown: not shown\n" << out;
  EXPECT_EQ(out.find("layer split"), std::string::npos) << out;
  j.set_pipeline_blocks(16);
  out = RenderJob(j);
  EXPECT_NE(out.find("blocks          16 (state size unknown)\n"), std::string::npos) << out;
  j.set_block_state_bytes(1258291);  // 1.2 MiB.
  for (const std::vector<uint32_t>& stages : {std::vector<uint32_t>{8, 8}, {6, 10}}) {
    falcon::v1::ReplicaSplit* r = j.add_layer_split();
    for (uint32_t b : stages) r->add_stage_blocks(b);
  }
  out = RenderJob(j);
  EXPECT_NE(out.find("blocks          16 (1.2 MiB state each)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("layer split     dp1 6+10\n"), std::string::npos) << out;
}

TEST(Render, DirectiveAcks) {
  falcon::v1::DirectiveRecord r;
  r.mutable_directive()->set_job("j");
  for (uint32_t rank : {0, 1, 1, 2}) {
    auto* a = r.add_acks();
    a->set_rank(rank);
    a->set_status(rank == 2 ? falcon::v1::ACK_STATUS_REJECTED : falcon::v1::ACK_STATUS_APPLIED);
  }
  EXPECT_EQ(AckCount(r, 8), "2/8");  // Distinct ranks; the rejection does not count.
  EXPECT_EQ(AckCount(r, 0), "2/?");
  r.mutable_directive()->add_target_ranks(0);
  r.mutable_directive()->add_target_ranks(1);
  r.mutable_directive()->add_target_ranks(2);
  EXPECT_EQ(AckCount(r, 8), "2/3");
  falcon::v1::ListDirectivesResponse list;
  *list.add_directives() = r;
  EXPECT_TRUE(absl::StrContains(RenderDirectives(list, {{"j", 8}}), "2/3"));
}

// KIND is the word the controller's logs and metrics use (docs/glossary.md, "directive").
TEST(Render, DirectiveKindsAreTheLogAndMetricWords) {
  falcon::v1::ListDirectivesResponse list;
  falcon::v1::DirectiveRecord* plan = list.add_directives();
  plan->mutable_directive()->set_directive_id(3);
  plan->mutable_directive()->set_job("j");
  plan->mutable_directive()->mutable_micro_batch_plan()->add_micro_batches(4);
  falcon::v1::DirectiveRecord* revert = list.add_directives();
  *revert = *plan;
  revert->mutable_directive()->set_directive_id(4);
  revert->mutable_directive()->set_reverts_directive_id(3);
  falcon::v1::DirectiveRecord* pause = list.add_directives();
  pause->mutable_directive()->set_job("j");
  pause->mutable_directive()->mutable_pause();
  const std::string out = RenderDirectives(list, {{"j", 8}});
  EXPECT_TRUE(absl::StrContains(out, "  s2  ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "s2 (reverts 3)")) << out;
  EXPECT_TRUE(absl::StrContains(out, "pause")) << out;
  EXPECT_FALSE(absl::StrContains(out, "micro_batch_plan")) << out;
}

TEST(Render, Plan) {
  falcon::v1::DryRunPlanResponse p;
  auto* a = p.add_actions();
  a->set_strategy(falcon::v1::STRATEGY_S2_MICRO_BATCH);
  a->set_reason("lost 12.1 s >= S2 cost 10.0 s");
  a->set_iteration(70);
  for (uint32_t m : {2, 4, 4, 6}) p.mutable_micro_batch_plan()->add_micro_batches(m);
  p.set_predicted_iteration_time_s(0.105);
  const std::string out = RenderPlan("j", p);
  EXPECT_TRUE(absl::StrContains(out, "dry-run plan for job j (nothing sent)"));
  EXPECT_TRUE(absl::StrContains(out, "1     S2 micro-batch  70         lost 12.1 s")) << out;
  EXPECT_TRUE(absl::StrContains(out, "S2 micro-batches per dp: 2,4,4,6"));
  EXPECT_TRUE(absl::StrContains(out, "predicted iteration time 105.0 ms"));
  EXPECT_FALSE(absl::StrContains(out, "S3 layout"));
}

// The S2L plan: its split ("dp2 6+10") and the micro-batches that go with it.
TEST(Render, PlanShowsTheS2LSplitAndItsMicroBatches) {
  falcon::v1::DryRunPlanResponse p;
  auto* a = p.add_actions();
  a->set_strategy(falcon::v1::STRATEGY_S2L_LAYER_SPLIT);
  a->set_reason("when lost >= 1.002 s");
  a->set_iteration(90);
  for (int d = 0; d < 4; ++d) {
    falcon::v1::ReplicaSplit* r = p.mutable_layer_split()->add_replicas();
    r->add_stage_blocks(d == 2 ? 6 : 8);
    r->add_stage_blocks(d == 2 ? 10 : 8);
    p.mutable_layer_split()->add_micro_batches(d == 2 ? 13 : 17);
  }
  const std::string out = RenderPlan("j", p);
  EXPECT_TRUE(absl::StrContains(out, "1     S2L layer split  90         when lost")) << out;
  EXPECT_TRUE(
      absl::StrContains(out, "S2L layer split: dp2 6+10; micro-batches per dp: 17,17,13,17\n"))
      << out;
}

// The plan in force's ceiling, next to what the plan recovered as measured.
TEST(Render, EventShowsTheCeilingNextToTheMeasuredShare) {
  falcon::v1::Event e = SampleEvent();
  std::string out = RenderEvent(e);
  EXPECT_FALSE(absl::StrContains(out, "ceiling")) << out;
  falcon::v1::PlanCeiling* c = e.mutable_ceiling();
  c->set_strategy(falcon::v1::STRATEGY_S2L_LAYER_SPLIT);
  c->set_healthy_iteration_time_ns(660'000'000);
  c->set_slowed_iteration_time_ns(910'000'000);
  c->set_predicted_iteration_time_ns(710'000'000);
  c->set_recoverable(0.8812);
  e.set_healthy_iteration_time_ns(660'000'000);
  e.set_slow_iteration_time_ns(910'000'000);
  e.set_mitigated_iteration_time_ns(695'000'000);  // (910 - 695) / (910 - 660) = 0.86.
  out = RenderEvent(e);
  EXPECT_TRUE(absl::StrContains(out,
                                "ceiling S2L 0.88 (predicted 710.0 ms; healthy 660.0 ms, slowed "
                                "910.0 ms) — recovered 0.86 measured\n"))
      << out;
  // Not measured yet: the ceiling alone.
  e.clear_mitigated_iteration_time_ns();
  out = RenderEvent(e);
  EXPECT_TRUE(absl::StrContains(out, "slowed 910.0 ms)\n")) << out;
  EXPECT_FALSE(absl::StrContains(out, "measured")) << out;
  // The events table: a short column.
  falcon::v1::ListEventsResponse events;
  *events.add_events() = e;
  *events.add_events() = SampleEvent();
  const std::string table = RenderEvents(events);
  EXPECT_TRUE(absl::StrContains(table, "  LOST    CEILING\n")) << table;
  EXPECT_TRUE(absl::StrContains(table, "  S2L 0.88\n")) << table;
  EXPECT_TRUE(absl::StrContains(table, "  -\n")) << table;
}

TEST(HistoryCsv, MarksLandOnTheFirstPointAtOrAfterTheirIteration) {
  falcon::v1::GetHistoryResponse h;
  for (int64_t i : {50, 60, 62, 64, 66, 70, 100, 110}) {
    auto* p = h.add_points();
    p->set_iteration(i);
    p->set_time_ns(1000 + i);
    p->set_iteration_time_ns(i >= 60 && i < 100 ? 140'000'000 : 100'000'000);
  }
  *h.add_events() = SampleEvent();  // onset 60, alarm 63, verdict 65, action 70, recovery 100,
                                    // revert 101.
  std::vector<std::string> lines = absl::StrSplit(HistoryCsv(h), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0], "iteration,time_ns,iteration_time_s,plan_version,event_id,mark");
  EXPECT_EQ(lines[1], "50,1050,0.100000,0,,");
  EXPECT_EQ(lines[2], "60,1060,0.140000,0,3,onset");
  EXPECT_EQ(lines[3], "62,1062,0.140000,0,,");
  EXPECT_EQ(lines[4], "64,1064,0.140000,0,3,alarm");
  EXPECT_EQ(lines[5], "66,1066,0.140000,0,3,verdict");
  EXPECT_EQ(lines[6], "70,1070,0.140000,0,3,action");
  EXPECT_EQ(lines[7], "100,1100,0.100000,0,3,recovery");
  EXPECT_EQ(lines[8], "110,1110,0.100000,0,3,action");  // The revert, at 101.
  nlohmann::json j = HistoryJson("j", h);
  EXPECT_EQ(j["points"][1]["marks"][0]["mark"], "onset");
  EXPECT_EQ(j["events"][0]["event_id"], 3);
}

TEST(HistoryCsv, SeveralMarksOnOneRowAndNoneOutsideTheRange) {
  falcon::v1::GetHistoryResponse h;
  for (int64_t i : {61, 80}) h.add_points()->set_iteration(i);
  *h.add_events() = SampleEvent();
  std::vector<std::string> lines = absl::StrSplit(HistoryCsv(h), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  // Onset (60) is before the first point: left out. Alarm, verdict and the action share row 80.
  EXPECT_EQ(lines[1], "61,0,0.000000,0,,");
  EXPECT_EQ(lines[2], "80,0,0.000000,0,3;3;3,alarm;verdict;action");
}

}  // namespace
}  // namespace falcon::cli::ctl

namespace falcon::cli::ctl {
namespace {

TEST(Render, AuditListsWhoCalledWhatWithTheResult) {
  falcon::v1::ListAuditResponse audit;
  EXPECT_EQ(RenderAudit(audit), "no audit records\n");
  falcon::v1::AuditRecord* r = audit.add_records();
  r->set_audit_id(7);
  r->set_identity("bob");
  r->set_role("viewer");
  r->set_method("SetSettings");
  r->set_request("settings { dry_run: true }");
  r->set_result("PERMISSION_DENIED: SetSettings: ...");
  const std::string out = RenderAudit(audit);
  for (const char* want : {"IDENTITY", "bob", "viewer", "SetSettings", "PERMISSION_DENIED",
                           "settings { dry_run: true }"}) {
    EXPECT_TRUE(absl::StrContains(out, want)) << want << "\n" << out;
  }
}

}  // namespace
}  // namespace falcon::cli::ctl
