#include "deploy/demo/report.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/stats.h"

namespace falcon::deploy::demo {
namespace {

// Iterations after a directive before the mitigated window starts (plan switch, refill).
constexpr int64_t kSettleIterations = 8;
// Iterations of the healthy window before onset.
constexpr int64_t kHealthyWindow = 40;
// Iterations skipped after onset before the slowed window (the change point is fuzzy).
constexpr int64_t kOnsetSkip = 2;
// Tolerance on the detected onset before a fault's start.
constexpr int64_t kMatchSlack = 10;

double Clamp01(double x) { return std::max(0.0, std::min(1.0, x)); }

}  // namespace

std::string StrategyName(falcon::v1::Strategy strategy) {
  switch (strategy) {
    case falcon::v1::STRATEGY_S1_IGNORE:
      return "S1";
    case falcon::v1::STRATEGY_S2_MICRO_BATCH:
      return "S2";
    case falcon::v1::STRATEGY_S3_TOPOLOGY:
      return "S3";
    case falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART:
      return "S4";
    default:
      return "UNSPECIFIED";
  }
}

std::string CauseName(falcon::v1::Cause cause) {
  return std::string(absl::StripPrefix(falcon::v1::Cause_Name(cause), "CAUSE_"));
}

double MedianIterationTime(const std::vector<falcon::v1::HistoryPoint>& history, int64_t from,
                           int64_t to) {
  std::vector<double> v;
  for (const auto& p : history) {
    if (p.iteration() >= from && p.iteration() < to && p.iteration_time_ns() > 0) {
      v.push_back(static_cast<double>(p.iteration_time_ns()) * 1e-9);
    }
  }
  return common::Median(v);
}

Report BuildReport(const Scenario& scenario, const RunSettings& settings,
                   std::vector<falcon::v1::HistoryPoint> history,
                   const std::vector<falcon::v1::Event>& events) {
  Report report;
  report.scenario = scenario;
  report.settings = settings;
  {
    std::map<int64_t, falcon::v1::HistoryPoint> by_iteration;
    for (auto& p : history) by_iteration[p.iteration()] = std::move(p);
    for (auto& [it, p] : by_iteration) report.history.push_back(std::move(p));
  }
  const int64_t end_iteration = report.history.empty() ? 0 : report.history.back().iteration() + 1;

  std::vector<falcon::v1::Event> sorted = events;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.event_id() < b.event_id(); });
  std::vector<bool> fault_matched(scenario.faults.size(), false);
  for (const falcon::v1::Event& e : sorted) {
    EventReport r;
    r.event_id = e.event_id();
    r.state =
        std::string(absl::StripPrefix(falcon::v1::EventState_Name(e.state()), "EVENT_STATE_"));
    r.cause = CauseName(e.cause());
    for (uint32_t rank : e.ranks()) r.ranks.push_back(static_cast<int>(rank));
    for (const auto& l : e.links()) {
      r.links.emplace_back(static_cast<int>(l.src_rank()), static_cast<int>(l.dst_rank()));
    }
    r.onset_iteration = e.onset_iteration();
    r.alarm_iteration = e.alarm_iteration();
    r.verdict_iteration = e.verdict_iteration();
    r.recovery_iteration = e.recovery_iteration();
    if (r.alarm_iteration >= 0 && r.onset_iteration >= 0) {
      r.alarm_delay_iterations = r.alarm_iteration - r.onset_iteration;
    }
    if (e.alarm_time_ns() > 0 && e.onset_time_ns() > 0) {
      r.alarm_delay_s = static_cast<double>(e.alarm_time_ns() - e.onset_time_ns()) * 1e-9;
    }
    for (const auto& t : e.transitions()) {
      r.transitions.push_back(
          absl::StrCat(absl::StripPrefix(falcon::v1::EventState_Name(t.state()), "EVENT_STATE_"),
                       "@", t.iteration(), ": ", t.reason()));
    }
    r.rank_level = e.rank_level();
    r.slowdown_ratio = e.slowdown_ratio();
    for (const auto& a : e.actions()) {
      const bool skipped = a.directive_id() == 0 && a.strategy() != falcon::v1::STRATEGY_S1_IGNORE;
      r.actions.push_back(ActionMark{StrategyName(a.strategy()), a.iteration(), a.revert(),
                                     a.dry_run(), skipped, a.reason()});
    }

    // Match: the event's range overlaps a fault window that should raise an event.
    const int64_t ev_from = r.onset_iteration;
    const int64_t ev_to = r.recovery_iteration >= 0 ? r.recovery_iteration : end_iteration;
    int best = -1;
    int64_t best_distance = 0;
    for (size_t i = 0; i < scenario.faults.size(); ++i) {
      const InjectedFault& f = scenario.faults[i];
      if (!f.expect_event) continue;
      // The detected onset lies in the fault's window (give or take the change point's blur).
      if (ev_from < f.from_iteration - kMatchSlack || ev_from >= f.to_iteration) continue;
      int64_t distance = std::abs(ev_from - f.from_iteration);
      if (best < 0 || distance < best_distance) {
        best = static_cast<int>(i);
        best_distance = distance;
      }
    }
    r.matched_fault = best;
    int64_t window_end = ev_to;
    if (best >= 0) {
      const InjectedFault& f = scenario.faults[best];
      fault_matched[best] = true;
      r.cause_correct = r.cause == f.expected_cause;
      if (f.kind == FaultKind::kLink) {
        // Exactly the injected link (either direction).
        if (r.links.size() == 1) {
          const auto [src, dst] = r.links[0];
          r.link_direction_correct = src == f.src_rank && dst == f.dst_rank;
          r.culprit_correct = r.link_direction_correct || (src == f.dst_rank && dst == f.src_rank);
        }
      } else {
        // Exactly the injected rank.
        r.culprit_correct = r.ranks.size() == 1 && r.ranks[0] == f.rank;
      }
      window_end = std::min(window_end, f.to_iteration);
    } else {
      ++report.false_alarms;
    }

    // Iteration times.
    const int64_t onset = std::max<int64_t>(0, r.onset_iteration);
    r.iteration_time_healthy_s =
        MedianIterationTime(report.history, std::max<int64_t>(0, onset - kHealthyWindow), onset);
    int64_t first_action = -1, last_action = -1;
    for (const ActionMark& a : r.actions) {
      if (a.revert || a.dry_run || a.skipped || a.strategy == "S1") continue;
      if (a.iteration >= window_end) continue;
      if (first_action < 0) first_action = a.iteration;
      last_action = std::max(last_action, a.iteration);
    }
    int64_t slow_end = first_action >= 0 ? first_action : window_end;
    r.iteration_time_slow_s = MedianIterationTime(report.history, onset + kOnsetSkip, slow_end);
    if (r.iteration_time_slow_s == 0) {
      r.iteration_time_slow_s = MedianIterationTime(report.history, onset, slow_end);
    }
    if (last_action >= 0) {
      r.iteration_time_mitigated_s =
          MedianIterationTime(report.history, last_action + kSettleIterations, window_end);
    }
    const double gap = r.iteration_time_slow_s - r.iteration_time_healthy_s;
    if (r.iteration_time_mitigated_s > 0 && gap > 0) {
      r.slowdown_recovered =
          Clamp01((r.iteration_time_slow_s - r.iteration_time_mitigated_s) / gap);
    }
    report.events.push_back(std::move(r));
  }
  for (size_t i = 0; i < scenario.faults.size(); ++i) {
    if (scenario.faults[i].expect_event && !fault_matched[i]) {
      report.missed_faults.push_back(static_cast<int>(i));
    }
  }
  return report;
}

nlohmann::json ReportJson(const Report& report) {
  using nlohmann::json;
  json j;
  j["scenario"] = report.scenario.name;
  j["description"] = report.scenario.description;
  j["interrupted"] = report.interrupted;
  j["wall_time_s"] = report.wall_time_s;
  if (!report.note.empty()) j["note"] = report.note;
  j["iterations_completed"] = report.history.empty() ? 0 : report.history.back().iteration() + 1;

  json settings;
  settings["scenario"] = report.settings.scenario;
  settings["layout"] = report.settings.layout.ToString();
  settings["dp"] = report.settings.layout.dp;
  settings["pp"] = report.settings.layout.pp;
  settings["nodes"] = report.settings.nodes;
  settings["iterations"] = report.settings.iterations;
  settings["micro-batches"] = report.settings.micro_batches;
  settings["emulated_compute_ms"] = report.settings.emulated_compute_ms;
  settings["duration_s"] = report.settings.duration_s;
  settings["fault_spec"] = report.settings.fault_spec;
  settings["train_args"] = report.settings.train_args;
  settings["warmup_iterations"] = report.settings.warmup_iterations;
  {
    const falcon::v1::Settings& c = report.settings.controller_settings;
    json cs = json::object();
    if (c.has_s3_cost_seconds()) cs["s3_cost_seconds"] = c.s3_cost_seconds();
    if (c.has_s2_cost_iterations()) cs["s2_cost_iterations"] = c.s2_cost_iterations();
    if (c.has_s4_cost_seconds()) cs["s4_cost_seconds"] = c.s4_cost_seconds();
    if (c.has_verification_min_ratio()) {
      cs["verification_min_ratio"] = c.verification_min_ratio();
    }
    if (c.has_min_gap_iterations()) cs["min_gap_iterations"] = c.min_gap_iterations();
    settings["controller_settings"] = cs;
  }
  if (report.scenario.restart_controller_at_iteration >= 0) {
    settings["restart_controller_at_iteration"] = report.scenario.restart_controller_at_iteration;
  }
  j["settings"] = settings;

  json faults = json::array();
  for (const InjectedFault& f : report.scenario.faults) {
    json jf;
    jf["kind"] = FaultKindName(f.kind);
    jf["spec"] = f.ToSpec();
    jf["description"] = f.Describe();
    if (f.kind == FaultKind::kLink) {
      jf["src_rank"] = f.src_rank;
      jf["dst_rank"] = f.dst_rank;
    } else {
      jf["rank"] = f.rank;
    }
    jf["from_iteration"] = f.from_iteration;
    jf["to_iteration"] = f.to_iteration;
    jf["expect_event"] = f.expect_event;
    jf["expected_cause"] = f.expected_cause;
    jf["expected_strategy"] = f.expected_strategy;
    faults.push_back(jf);
  }
  j["injected_faults"] = faults;

  json evs = json::array();
  json false_ids = json::array();
  for (const EventReport& e : report.events) {
    json je;
    je["event_id"] = e.event_id;
    je["state"] = e.state;
    je["cause"] = e.cause;
    je["ranks"] = e.ranks;
    json links = json::array();
    for (const auto& [src, dst] : e.links) links.push_back({{"src_rank", src}, {"dst_rank", dst}});
    je["links"] = links;
    je["onset_iteration"] = e.onset_iteration;
    je["alarm_iteration"] = e.alarm_iteration;
    je["verdict_iteration"] = e.verdict_iteration;
    je["recovery_iteration"] = e.recovery_iteration;
    je["alarm_delay_iterations"] = e.alarm_delay_iterations;
    je["alarm_delay_s"] = e.alarm_delay_s;
    json actions = json::array();
    for (const ActionMark& a : e.actions) {
      actions.push_back({{"strategy", a.strategy},
                         {"iteration", a.iteration},
                         {"revert", a.revert},
                         {"dry_run", a.dry_run},
                         {"skipped", a.skipped},
                         {"reason", a.reason}});
    }
    je["actions"] = actions;
    je["transitions"] = e.transitions;
    je["rank_level"] = e.rank_level;
    je["slowdown_ratio"] = e.slowdown_ratio;
    je["iteration_time_healthy_s"] = e.iteration_time_healthy_s;
    je["iteration_time_slow_s"] = e.iteration_time_slow_s;
    je["iteration_time_mitigated_s"] = e.iteration_time_mitigated_s;
    je["slowdown_recovered"] = e.slowdown_recovered;
    je["matched_fault"] = e.matched_fault >= 0 ? json(e.matched_fault) : json(nullptr);
    je["cause_correct"] = e.cause_correct;
    je["culprit_correct"] = e.culprit_correct;
    if (!e.links.empty()) je["link_direction_correct"] = e.link_direction_correct;
    evs.push_back(je);
    if (e.matched_fault < 0) false_ids.push_back(e.event_id);
  }
  j["events"] = evs;
  j["false_alarms"] = report.false_alarms;
  j["false_alarm_event_ids"] = false_ids;
  j["missed_faults"] = report.missed_faults;
  if (report.scenario.restart_controller_at_iteration >= 0) {
    j["event_ids_before_restart"] = report.event_ids_before_restart;
    j["event_ids_at_end"] = report.event_ids_at_end;
  }
  return j;
}

namespace {

std::string Culprit(const EventReport& e) {
  std::vector<std::string> parts;
  for (int r : e.ranks) parts.push_back(absl::StrCat("rank ", r));
  for (const auto& [s, d] : e.links) parts.push_back(absl::StrCat("link ", s, "->", d));
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

}  // namespace

std::string SummaryText(const Report& report) {
  std::string out = absl::StrFormat("=== Falcon demo summary: scenario %s, layout %s, %d nodes\n",
                                    report.scenario.name, report.settings.layout.ToString(),
                                    report.settings.nodes);
  for (size_t i = 0; i < report.scenario.faults.size(); ++i) {
    absl::StrAppend(&out, "injected #", i, ": ", report.scenario.faults[i].Describe(),
                    report.scenario.faults[i].expect_event ? "" : " (should be ignored)", "\n");
  }
  if (report.events.empty()) absl::StrAppend(&out, "no events\n");
  for (const EventReport& e : report.events) {
    std::string verdict = e.matched_fault < 0
                              ? "FALSE ALARM"
                              : absl::StrCat("matches injected #", e.matched_fault, ", cause ",
                                             e.cause_correct ? "correct" : "WRONG", ", culprit ",
                                             e.culprit_correct ? "correct" : "WRONG");
    std::vector<std::string> actions;
    for (const ActionMark& a : e.actions) {
      actions.push_back(absl::StrCat(a.revert ? "revert " : "", a.strategy, "@", a.iteration,
                                     a.dry_run ? " (dry run)" : "", a.skipped ? " (skipped)" : ""));
    }
    absl::StrAppendFormat(
        &out,
        "event %d [%s] %s on %s: %s\n"
        "  onset it %d, alarm it %d (delay %d it, %.1f s), verdict it %d, recovery it %d\n"
        "  actions: %s\n"
        "  iteration time healthy %.3f s, slowed %.3f s, mitigated %.3f s -> %.0f%% of the "
        "slowdown recovered\n",
        e.event_id, e.state, e.cause, Culprit(e), verdict, e.onset_iteration, e.alarm_iteration,
        e.alarm_delay_iterations, e.alarm_delay_s, e.verdict_iteration, e.recovery_iteration,
        actions.empty() ? "none" : absl::StrJoin(actions, ", "), e.iteration_time_healthy_s,
        e.iteration_time_slow_s, e.iteration_time_mitigated_s, 100 * e.slowdown_recovered);
  }
  for (int i : report.missed_faults) absl::StrAppend(&out, "MISSED: injected #", i, "\n");
  absl::StrAppendFormat(&out, "false alarms: %d; run wall time %.0f s%s\n", report.false_alarms,
                        report.wall_time_s, report.interrupted ? " (interrupted)" : "");
  return out;
}

}  // namespace falcon::deploy::demo
