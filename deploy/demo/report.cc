#include "deploy/demo/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/directive_kind.h"
#include "common/stats.h"

namespace falcon::deploy::demo {
namespace {

// Iterations after an injected fault's end that still count as touched by it.
constexpr int64_t kFaultTail = 2;

// The fault with no event of its own that an event over [from, to], which named its culprit at
// `verdict`, may have taken in, or -1: one that should raise an event and has none yet (events are
// scored in id order) whose window [from, to] overlaps, or one that should be ignored (a blip)
// during whose window (plus kFaultTail) the verdict fell.
int UnmatchedFaultTakenIn(const Scenario& scenario, const std::vector<bool>& matched, int64_t from,
                          int64_t to, int64_t verdict) {
  for (size_t i = 0; i < scenario.faults.size(); ++i) {
    const InjectedFault& f = scenario.faults[i];
    if (matched[i]) continue;
    const bool taken_in =
        f.expect_event ? from < f.to_iteration && to >= f.from_iteration
                       : verdict >= f.from_iteration && verdict < f.to_iteration + kFaultTail;
    if (taken_in) return static_cast<int>(i);
  }
  return -1;
}

// Iterations after a directive or its revert before the plan in force has settled (plan switch,
// pipeline refill).
constexpr int64_t kSettleIterations = 8;
// Iterations of the healthy window before onset, and the fewest it may hold.
constexpr int64_t kHealthyWindow = 40;
constexpr int64_t kMinHealthyIterations = 10;
// Iterations skipped after onset before the slowed window (the change point is fuzzy).
constexpr int64_t kOnsetSkip = 2;
// Tolerance on the detected onset before a fault's start.
constexpr int64_t kMatchSlack = 10;

// Iterations [from, to).
struct Span {
  int64_t from = 0;
  int64_t to = 0;
};

std::string It(int64_t it) { return it < 0 ? "-" : absl::StrCat(it); }

// The name the ranks of a NIC fault's node register (the clusters name nodes node<K>).
std::string NicNodeName(const InjectedFault& f) { return absl::StrCat("node", f.node); }

bool IsDirective(const ActionMark& a) {
  return !a.revert && !a.dry_run && !a.skipped && a.strategy != "S1";
}

// When `e`'s mitigation was in force: from its first directive until kSettleIterations after
// the revert that follows its last directive, or to `end` when none followed.
std::optional<Span> MitigationSpan(const EventReport& e, int64_t end) {
  int64_t first = -1, last = -1, revert = -1;
  for (const ActionMark& a : e.actions) {
    if (a.dry_run || a.skipped || a.strategy == "S1") continue;
    if (a.revert) {
      revert = std::max(revert, a.iteration);
    } else {
      if (first < 0 || a.iteration < first) first = a.iteration;
      last = std::max(last, a.iteration);
    }
  }
  if (first < 0) return std::nullopt;
  return Span{first, revert > last ? revert + kSettleIterations : end};
}

// The healthy window before `end`: the last kHealthyWindow iterations of the latest stretch of
// at least kMinHealthyIterations that no span in `touched` covers; nullopt when none.
std::optional<Span> HealthyWindow(int64_t end, const std::vector<Span>& touched) {
  auto is_touched = [&touched](int64_t i) {
    for (const Span& s : touched) {
      if (i >= s.from && i < s.to) return true;
    }
    return false;
  };
  int64_t stretch_end = end;  // The clean stretch being walked is [i + 1, stretch_end).
  for (int64_t i = end - 1; i >= -1; --i) {
    if (i >= 0 && !is_touched(i)) continue;
    if (stretch_end - (i + 1) >= kMinHealthyIterations) {
      return Span{std::max(i + 1, stretch_end - kHealthyWindow), stretch_end};
    }
    stretch_end = i;
  }
  return std::nullopt;
}

}  // namespace

std::string ActionLabel(const ActionMark& a) {
  return absl::StrCat(a.revert ? "revert " : "", a.strategy, "@", a.iteration,
                      a.dry_run ? " (dry run)" : "", a.skipped ? " (skipped)" : "",
                      a.after_end ? " (after the end)" : "");
}

std::string StrategyName(falcon::v1::Strategy strategy) {
  const absl::string_view word = common::StrategyShortName(strategy);
  return word.empty() ? "UNSPECIFIED" : std::string(word);
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
  report.iterations_completed = end_iteration;

  std::vector<falcon::v1::Event> sorted = events;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.event_id() < b.event_id(); });
  std::vector<bool> fault_matched(scenario.faults.size(), false);
  // Per fault, the iteration an S4 restart left its culprit out at (-1: never).
  std::vector<int64_t> removed_at(scenario.faults.size(), -1);
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
    r.nodes.assign(e.nodes().begin(), e.nodes().end());
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
    r.localized_from_profiling = e.localized_from_profiling();
    if (e.evidence() != falcon::v1::EVIDENCE_UNSPECIFIED) {
      r.evidence = absl::AsciiStrToLower(
          absl::StripPrefix(falcon::v1::Evidence_Name(e.evidence()), "EVIDENCE_"));
    }
    r.validation_pause_s = static_cast<double>(e.validation_pause_ns()) * 1e-9;
    r.slowdown_ratio = e.slowdown_ratio();
    for (const auto& a : e.actions()) {
      ActionMark mark;
      mark.strategy = StrategyName(a.strategy());
      mark.iteration = a.iteration();
      mark.revert = a.revert();
      mark.dry_run = a.dry_run();
      mark.skipped = a.directive_id() == 0 && a.strategy() != falcon::v1::STRATEGY_S1_IGNORE;
      mark.after_end = a.iteration() >= end_iteration;
      mark.reason = a.reason();
      r.actions.push_back(std::move(mark));
    }

    r.explained_by_event_id = e.explained_by_event_id();
    if (r.explained_by_event_id != 0) {
      // Part of an earlier event (its culprit, or noise under its plan): scored with that event.
      report.events.push_back(std::move(r));
      continue;
    }
    // Match: the event's range overlaps a fault window that should raise an event.
    const int64_t ev_from = r.onset_iteration;
    const int64_t ev_to = r.recovery_iteration >= 0 ? r.recovery_iteration : end_iteration;
    int best = -1;
    int64_t best_distance = 0;
    for (size_t i = 0; i < scenario.faults.size(); ++i) {
      const InjectedFault& f = scenario.faults[i];
      if (!f.expect_event) continue;
      // One event per fault: a later one in its window is another slowdown (outside load on
      // another rank, seen in CI), scored as an unmatched event.
      if (fault_matched[i]) continue;
      // An S4 restart left the fault's culprit out: the fault no longer touches the job.
      if (removed_at[i] >= 0 && ev_from >= removed_at[i]) continue;
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
    const int64_t onset = std::max<int64_t>(0, r.onset_iteration);
    int64_t healthy_end = onset;  // The healthy window ends before the slowdown starts.
    int64_t slow_from = onset + kOnsetSkip;
    if (best >= 0) {
      const InjectedFault& f = scenario.faults[best];
      fault_matched[best] = true;
      r.cause_correct = r.cause == f.expected_cause;
      if (f.kind == FaultKind::kLink && f.injection == FaultInjection::kKernel) {
        // A kernel cap acts between two nodes: every rank link from the source node to the
        // destination node is slowed, so the culprit is right when every link named runs between
        // those two nodes (direction: all of them from the source node).
        const int world = settings.layout.world();
        const int src_node = NodeOf(f.src_rank, world, settings.nodes);
        const int dst_node = NodeOf(f.dst_rank, world, settings.nodes);
        bool between = !r.links.empty(), forward = !r.links.empty();
        for (const auto& [src, dst] : r.links) {
          const int a = NodeOf(src, world, settings.nodes), b = NodeOf(dst, world, settings.nodes);
          between =
              between && ((a == src_node && b == dst_node) || (a == dst_node && b == src_node));
          forward = forward && a == src_node && b == dst_node;
        }
        r.culprit_correct = between;
        r.link_direction_correct = forward;
      } else if (f.kind == FaultKind::kNic) {
        // The degraded node named as the culprit, its NIC, and no other
        // (docs/algorithms.md#node-nic-faults).
        r.culprit_correct = r.nodes == std::vector<std::string>{NicNodeName(f)};
      } else if (f.kind == FaultKind::kLink) {
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
      r.fault_start_iteration = f.from_iteration;
      if (r.alarm_iteration >= 0)
        r.alarm_after_fault_iterations = r.alarm_iteration - f.from_iteration;
      healthy_end = std::min(healthy_end, f.from_iteration);
      slow_from = std::max(slow_from, f.from_iteration);
      if (r.onset_iteration >= 0 && r.onset_iteration < f.from_iteration) {
        r.notes.push_back(absl::StrCat(
            "the detector's change point (it ", r.onset_iteration, ") lies ",
            f.from_iteration - r.onset_iteration, " it before the fault started (it ",
            f.from_iteration,
            "): the change point is placed where the series' level shifts, which noise just "
            "before the fault can move earlier"));
      }
    } else if (const int taken_in = Blamed(r)
                                        ? UnmatchedFaultTakenIn(scenario, fault_matched, ev_from,
                                                                ev_to, r.verdict_iteration)
                                        : -1;
               IsFalseAlarm(r) || taken_in >= 0) {
      // A culprit that "cleared" while a fault with no event of its own ran may have taken the
      // fault's slowdown in; one named during a fault that should be ignored was not ignored.
      if (!IsFalseAlarm(r)) {
        r.notes.push_back(absl::StrCat(
            "named a culprit ", scenario.faults[taken_in].expect_event ? "while" : "during",
            " injected #", taken_in,
            scenario.faults[taken_in].expect_event ? " ran, which had no event of its own"
                                                   : ", which should be ignored"));
      }
      ++report.false_alarms;
    } else if (Blamed(r)) {
      r.cleared_unmitigated = true;
      ++report.cleared_slowdowns;
    } else {
      r.unexplained = true;
      ++report.unexplained_slowdowns;
    }

    // Healthy: iterations no injected fault, earlier event or mitigation in force touches.
    std::vector<Span> touched;
    for (const InjectedFault& f : scenario.faults) {
      touched.push_back(Span{f.from_iteration, f.to_iteration + kFaultTail});
    }
    for (const EventReport& earlier : report.events) {
      if (earlier.onset_iteration >= onset || earlier.explained_by_event_id != 0) continue;
      touched.push_back(
          Span{std::max<int64_t>(0, earlier.onset_iteration),
               earlier.recovery_iteration >= 0 ? earlier.recovery_iteration : end_iteration});
      if (std::optional<Span> m = MitigationSpan(earlier, end_iteration)) touched.push_back(*m);
    }
    if (std::optional<Span> w = HealthyWindow(healthy_end, touched)) {
      r.healthy_from = w->from;
      r.healthy_to = w->to;
      r.iteration_time_healthy_s = MedianIterationTime(report.history, w->from, w->to);
    }
    if (r.iteration_time_healthy_s == 0) {
      r.healthy_from = r.healthy_to = -1;
      r.notes.push_back(absl::StrCat(
          "no healthy baseline: before it ", healthy_end, " no ", kMinHealthyIterations,
          " recorded iterations in a row are free of injected faults, earlier events and "
          "mitigations in force"));
    }

    for (const ActionMark& a : r.actions) {
      if (a.strategy != "S4" || !IsDirective(a) || a.dry_run) continue;
      r.restart_iteration = a.iteration;
      if (best >= 0 && r.culprit_correct) removed_at[best] = a.iteration;
    }

    int64_t first_action = -1, last_action = -1;
    for (const ActionMark& a : r.actions) {
      if (!IsDirective(a)) continue;
      if (a.iteration >= window_end) continue;
      if (first_action < 0) first_action = a.iteration;
      last_action = std::max(last_action, a.iteration);
    }
    int64_t slow_end = first_action >= 0 ? first_action : window_end;
    r.iteration_time_slow_s = MedianIterationTime(report.history, slow_from, slow_end);
    if (r.iteration_time_slow_s == 0) {
      r.iteration_time_slow_s =
          MedianIterationTime(report.history, std::max(onset, slow_from - kOnsetSkip), slow_end);
    }
    if (last_action >= 0) {
      // The plan is in force until its revert (a recovery seen under it, or the level disabled):
      // what follows the revert is not mitigated.
      int64_t mitigated_end = window_end;
      for (const ActionMark& a : r.actions) {
        if (a.revert && !a.dry_run && a.iteration > last_action) {
          mitigated_end = std::min(mitigated_end, a.iteration);
        }
      }
      r.iteration_time_mitigated_s =
          MedianIterationTime(report.history, last_action + kSettleIterations, mitigated_end);
    }
    const double healthy = r.iteration_time_healthy_s;
    const double slow = r.iteration_time_slow_s;
    const double mitigated = r.iteration_time_mitigated_s;
    if (mitigated > 0 && healthy > 0 && slow > healthy) {
      r.slowdown_recovered = (slow - mitigated) / (slow - healthy);
      if (mitigated < healthy) {
        r.notes.push_back(absl::StrFormat(
            "mitigated %.3f s is %.1f%% below the healthy baseline %.3f s, so more than the "
            "slowdown is recovered: the plan in force (or the noise of a shared CPU) makes the "
            "job faster than it was before the fault",
            mitigated, 100 * (healthy - mitigated) / healthy, healthy));
      } else if (mitigated > slow) {
        r.notes.push_back(absl::StrFormat(
            "mitigated %.3f s is slower than slowed %.3f s: the mitigation made it worse",
            mitigated, slow));
      }
    } else if (mitigated > 0 && healthy > 0) {
      r.notes.push_back(absl::StrFormat(
          "slowed %.3f s is not above healthy %.3f s: no slowdown to recover", slow, healthy));
    }
    if (e.has_ceiling() && e.ceiling().predicted_iteration_time_ns() > 0) {
      const falcon::v1::PlanCeiling& c = e.ceiling();
      r.ceiling_strategy = StrategyName(c.strategy());
      r.iteration_time_predicted_s = static_cast<double>(c.predicted_iteration_time_ns()) * 1e-9;
      r.ceiling_healthy_s = static_cast<double>(c.healthy_iteration_time_ns()) * 1e-9;
      r.ceiling_slowed_s = static_cast<double>(c.slowed_iteration_time_ns()) * 1e-9;
      r.recoverable_ceiling = c.recoverable();
      if (mitigated > 0) r.prediction_error = mitigated / r.iteration_time_predicted_s - 1;
    }
    report.events.push_back(std::move(r));
  }
  for (size_t i = 0; i < scenario.faults.size(); ++i) {
    if (fault_matched[i]) continue;
    if (!scenario.faults[i].not_applied.empty()) {
      report.unapplied_faults.push_back(static_cast<int>(i));
    } else if (scenario.faults[i].from_iteration >= end_iteration) {
      report.unreached_faults.push_back(static_cast<int>(i));
    } else if (scenario.faults[i].expect_event) {
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
  j["iterations_completed"] = report.iterations_completed;

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
  settings["time_limit_s"] = report.settings.time_limit_s;
  settings["fault_spec"] = report.settings.fault_spec;
  settings["fault_injection"] = report.settings.fault_injection;
  settings["cluster"] = report.settings.cluster;
  settings["train_args"] = report.settings.train_args;
  settings["warmup_iterations"] = report.settings.warmup_iterations;
  {
    const falcon::v1::Settings& c = report.settings.controller_settings;
    json cs = json::object();
    if (c.has_s3_cost_seconds()) cs["s3_cost_seconds"] = c.s3_cost_seconds();
    if (c.has_s2_cost_iterations()) cs["s2_cost_iterations"] = c.s2_cost_iterations();
    if (c.has_s4_cost_seconds()) cs["s4_cost_seconds"] = c.s4_cost_seconds();
    if (c.has_s2l_enabled()) cs["s2l_enabled"] = c.s2l_enabled();
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
  if (!report.settings.ground_truth_json.empty()) {
    // The driver's own record, embedded as it wrote it (kept as text when it does not parse).
    json truth =
        json::parse(report.settings.ground_truth_json, nullptr, /*allow_exceptions=*/false);
    j["ground_truth"] = truth.is_discarded() ? json(report.settings.ground_truth_json) : truth;
  }

  json faults = json::array();
  for (const InjectedFault& f : report.scenario.faults) {
    json jf;
    jf["kind"] = FaultKindName(f.kind);
    jf["spec"] = f.ToSpec();
    jf["description"] = f.Describe();
    if (f.kind == FaultKind::kLink) {
      jf["src_rank"] = f.src_rank;
      jf["dst_rank"] = f.dst_rank;
    } else if (f.kind == FaultKind::kNic) {
      jf["node"] = NicNodeName(f);
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
    je["nodes"] = e.nodes;
    je["onset_iteration"] = e.onset_iteration;
    je["alarm_iteration"] = e.alarm_iteration;
    je["verdict_iteration"] = e.verdict_iteration;
    je["recovery_iteration"] = e.recovery_iteration;
    je["alarm_delay_iterations"] = e.alarm_delay_iterations;
    je["alarm_delay_s"] = e.alarm_delay_s;
    auto or_null = [](int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
    je["fault_start_iteration"] = or_null(e.fault_start_iteration);
    je["alarm_after_fault_iterations"] = e.fault_start_iteration >= 0 && e.alarm_iteration >= 0
                                             ? json(e.alarm_after_fault_iterations)
                                             : json(nullptr);
    json actions = json::array();
    for (const ActionMark& a : e.actions) {
      actions.push_back({{"strategy", a.strategy},
                         {"iteration", a.iteration},
                         {"revert", a.revert},
                         {"dry_run", a.dry_run},
                         {"skipped", a.skipped},
                         {"after_end", a.after_end},
                         {"reason", a.reason}});
    }
    je["actions"] = actions;
    je["transitions"] = e.transitions;
    je["rank_level"] = e.rank_level;
    je["localized_from_profiling"] = e.localized_from_profiling;
    je["evidence"] = e.evidence;
    je["validation_pause_s"] = e.validation_pause_s;
    je["slowdown_ratio"] = e.slowdown_ratio;
    je["iteration_time_healthy_s"] = e.iteration_time_healthy_s;
    je["healthy_window"] =
        e.healthy_from >= 0
            ? json({{"from_iteration", e.healthy_from}, {"to_iteration", e.healthy_to}})
            : json(nullptr);
    je["iteration_time_slow_s"] = e.iteration_time_slow_s;
    je["iteration_time_mitigated_s"] = e.iteration_time_mitigated_s;
    je["slowdown_recovered"] =
        e.slowdown_recovered.has_value() ? json(*e.slowdown_recovered) : json(nullptr);
    je["recoverable_ceiling"] =
        e.recoverable_ceiling.has_value() ? json(*e.recoverable_ceiling) : json(nullptr);
    je["ceiling_strategy"] = e.ceiling_strategy.empty() ? json(nullptr) : json(e.ceiling_strategy);
    je["iteration_time_predicted_s"] =
        e.ceiling_strategy.empty() ? json(nullptr) : json(e.iteration_time_predicted_s);
    je["prediction_error"] =
        e.prediction_error.has_value() ? json(*e.prediction_error) : json(nullptr);
    je["notes"] = e.notes;
    je["matched_fault"] = e.matched_fault >= 0 ? json(e.matched_fault) : json(nullptr);
    je["cause_correct"] = e.cause_correct;
    je["culprit_correct"] = e.culprit_correct;
    if (!e.links.empty()) je["link_direction_correct"] = e.link_direction_correct;
    je["restart_iteration"] = or_null(e.restart_iteration);
    je["explained_by_event_id"] =
        e.explained_by_event_id != 0 ? json(e.explained_by_event_id) : json(nullptr);
    je["unexplained"] = e.unexplained;
    je["cleared_unmitigated"] = e.cleared_unmitigated;
    evs.push_back(je);
    if (e.matched_fault < 0 && e.explained_by_event_id == 0 && !e.unexplained &&
        !e.cleared_unmitigated) {
      false_ids.push_back(e.event_id);
    }
  }
  j["events"] = evs;
  j["false_alarms"] = report.false_alarms;
  j["false_alarm_event_ids"] = false_ids;
  j["unexplained_slowdowns"] = report.unexplained_slowdowns;
  j["cleared_slowdowns"] = report.cleared_slowdowns;
  j["missed_faults"] = report.missed_faults;
  j["unreached_faults"] = report.unreached_faults;
  j["unapplied_faults"] = nlohmann::json::array();
  for (int i : report.unapplied_faults) {
    j["unapplied_faults"].push_back(
        {{"fault", i}, {"why", report.scenario.faults[static_cast<size_t>(i)].not_applied}});
  }
  if (report.scenario.restart_controller_at_iteration >= 0) {
    j["event_ids_before_restart"] = report.event_ids_before_restart;
    j["event_ids_at_end"] = report.event_ids_at_end;
  }
  if (report.job_at_end.world_size > 0) {
    json nodes = json::object();
    for (const auto& [node, ranks] : report.job_at_end.ranks_by_node) nodes[node] = ranks;
    j["job_at_end"] = {{"world_size", report.job_at_end.world_size},
                       {"epoch", report.job_at_end.epoch},
                       {"dp", report.job_at_end.dp},
                       {"pp", report.job_at_end.pp},
                       {"ranks_by_node", nodes}};
  } else {
    j["job_at_end"] = nullptr;
  }
  return j;
}

JobAtEnd JobAtEndOf(const falcon::v1::Job& job) {
  JobAtEnd out;
  out.world_size = job.world_size();
  out.epoch = job.epoch();
  out.dp = job.dp_size();
  out.pp = job.pp_size();
  std::map<std::string, std::vector<int>> by_node;
  for (const falcon::v1::RankInfo& r : job.ranks()) {
    by_node[r.node()].push_back(static_cast<int>(r.rank()));
  }
  for (auto& [node, ranks] : by_node) {
    std::sort(ranks.begin(), ranks.end());
    out.ranks_by_node.emplace_back(node, std::move(ranks));
  }
  return out;
}

namespace {

std::string Seconds(double s) { return s > 0 ? absl::StrFormat("%.3f s", s) : "-"; }

}  // namespace

bool Blamed(const EventReport& e) {
  if (!e.links.empty() || !e.nodes.empty()) return true;
  return !e.ranks.empty() && (e.cause == "COMPUTE" || e.cause == "COMMUNICATION");
}

bool Mitigated(const EventReport& e) {
  return std::any_of(e.actions.begin(), e.actions.end(), [](const ActionMark& a) {
    return a.strategy != "S1" && !a.revert && !a.skipped && !a.dry_run;
  });
}

bool IsFalseAlarm(const EventReport& e) {
  if (Mitigated(e)) return true;
  return Blamed(e) && (e.state != "RECOVERED" || e.recovery_iteration < 0);
}

std::string ScoreText(const EventReport& e) {
  if (e.explained_by_event_id != 0) {
    return absl::StrCat("part of event ", e.explained_by_event_id,
                        " (validation found only its culprit)");
  }
  if (e.matched_fault >= 0) {
    return absl::StrCat("matches injected #", e.matched_fault, ", cause ",
                        e.cause_correct ? "correct" : "WRONG", ", culprit ",
                        e.culprit_correct ? "correct" : "WRONG");
  }
  if (e.unexplained) return "UNEXPLAINED (no culprit, nothing mitigated)";
  if (e.cleared_unmitigated) {
    return "CLEARED BY ITSELF (culprit named, no fault injected, recovered before any mitigation)";
  }
  return "FALSE ALARM";
}

std::string CulpritText(const EventReport& e) {
  std::vector<std::string> parts;
  for (int r : e.ranks) parts.push_back(absl::StrCat("rank ", r));
  if (!e.nodes.empty()) {
    std::vector<std::string> nics;
    for (const std::string& n : e.nodes) nics.push_back(absl::StrCat(n, "'s NIC"));
    parts.push_back(absl::StrCat(absl::StrJoin(nics, ", "), " (", e.links.size(),
                                 e.links.size() == 1 ? " link)" : " links)"));
  } else {
    for (const auto& [s, d] : e.links) parts.push_back(absl::StrCat("link ", s, "->", d));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

std::string IterationsLine(const Report& report) {
  std::string line = absl::StrCat(report.iterations_completed);
  if (report.settings.iterations > 0) {
    absl::StrAppend(&line, " of ", report.settings.iterations);
  }
  return absl::StrCat(line, " iterations");
}

std::string EventTimesLine(const EventReport& e) {
  std::string out;
  if (e.fault_start_iteration >= 0) {
    const int64_t lead = e.fault_start_iteration - e.onset_iteration;
    absl::StrAppend(&out, "fault from it ", e.fault_start_iteration, ", change point it ",
                    It(e.onset_iteration),
                    e.onset_iteration < 0 || lead == 0 ? ""
                    : lead > 0 ? absl::StrCat(" (", lead, " it before the fault)")
                               : absl::StrCat(" (", -lead, " it after the fault started)"));
  } else {
    absl::StrAppend(&out, "change point it ", It(e.onset_iteration));
  }
  absl::StrAppend(&out, ", alarm it ", It(e.alarm_iteration));
  if (e.alarm_iteration >= 0) {
    std::vector<std::string> delays;
    if (e.fault_start_iteration >= 0) {
      delays.push_back(
          e.alarm_after_fault_iterations >= 0
              ? absl::StrCat(e.alarm_after_fault_iterations, " it after the fault started")
              : absl::StrCat(-e.alarm_after_fault_iterations, " it before the fault started"));
    }
    if (e.alarm_delay_iterations >= 0) {
      delays.push_back(
          absl::StrCat(e.alarm_delay_iterations, " it",
                       e.alarm_delay_s >= 0 ? absl::StrFormat(" / %.1f s", e.alarm_delay_s) : "",
                       " after the change point"));
    }
    if (!delays.empty()) absl::StrAppend(&out, " (", absl::StrJoin(delays, "; "), ")");
  }
  absl::StrAppend(&out, "\n  verdict it ", It(e.verdict_iteration));
  if (e.verdict_iteration >= 0 && e.evidence == "peer_timing") {
    absl::StrAppend(&out, " (from peer timing, no pause)");
  } else if (e.verdict_iteration >= 0 && e.localized_from_profiling) {
    absl::StrAppend(&out, " (from profiling, no pause)");
  } else if (e.verdict_iteration >= 0 && e.validation_pause_s > 0) {
    absl::StrAppendFormat(&out, " (validation paused the job %.2f s)", e.validation_pause_s);
  }
  absl::StrAppend(&out, ", ",
                  e.recovery_iteration >= 0 ? absl::StrCat("recovered it ", e.recovery_iteration)
                                            : "not recovered");
  return out;
}

std::string RecoveredText(const EventReport& e) {
  std::string out;
  if (e.slowdown_recovered.has_value()) {
    out = absl::StrFormat("%.0f%% of the slowdown recovered", 100 * *e.slowdown_recovered);
  } else if (e.iteration_time_mitigated_s <= 0) {
    out = "nothing mitigated";
  } else {
    out = "share recovered not measurable";
  }
  if (e.recoverable_ceiling.has_value()) {
    absl::StrAppendFormat(
        &out, "\n  ceiling of the %s plan %.0f%%: predicted %s (model: healthy %s, slowed %s)",
        e.ceiling_strategy, 100 * *e.recoverable_ceiling, Seconds(e.iteration_time_predicted_s),
        Seconds(e.ceiling_healthy_s), Seconds(e.ceiling_slowed_s));
    if (e.prediction_error.has_value()) {
      absl::StrAppendFormat(&out, ", measured %s (%+.0f%%)", Seconds(e.iteration_time_mitigated_s),
                            100 * *e.prediction_error);
    }
  }
  return out;
}

std::string SummaryText(const Report& report) {
  std::string out = absl::StrFormat(
      "=== Falcon demo summary: scenario %s, layout %s, %d nodes, %s\n", report.scenario.name,
      report.settings.layout.ToString(), report.settings.nodes, IterationsLine(report));
  for (size_t i = 0; i < report.scenario.faults.size(); ++i) {
    absl::StrAppend(&out, "injected #", i, ": ", report.scenario.faults[i].Describe(),
                    report.scenario.faults[i].expect_event ? "" : " (should be ignored)", "\n");
  }
  if (report.events.empty()) absl::StrAppend(&out, "no events\n");
  for (const EventReport& e : report.events) {
    const std::string verdict = ScoreText(e);
    // In iteration order: a plan is recorded at its effective iteration, ahead of the one it was
    // issued at, so a level judged meanwhile (an S3 skipped at 89) comes before it (S2@92).
    std::vector<ActionMark> in_order = e.actions;
    std::stable_sort(
        in_order.begin(), in_order.end(),
        [](const ActionMark& a, const ActionMark& b) { return a.iteration < b.iteration; });
    std::vector<std::string> actions;
    for (const ActionMark& a : in_order) actions.push_back(ActionLabel(a));
    std::string healthy = Seconds(e.iteration_time_healthy_s);
    if (e.healthy_from >= 0) {
      absl::StrAppend(&healthy, " (it ", e.healthy_from, "-", e.healthy_to - 1, ")");
    }
    absl::StrAppendFormat(&out,
                          "event %d [%s] %s on %s: %s\n"
                          "  %s\n"
                          "  actions: %s\n"
                          "  iteration time healthy %s, slowed %s, mitigated %s -> %s\n",
                          e.event_id, e.state, e.cause, CulpritText(e), verdict, EventTimesLine(e),
                          actions.empty() ? "none" : absl::StrJoin(actions, ", "), healthy,
                          Seconds(e.iteration_time_slow_s), Seconds(e.iteration_time_mitigated_s),
                          RecoveredText(e));
    if (e.restart_iteration >= 0) {
      absl::StrAppend(&out, "  restarted from its checkpoint at it ", e.restart_iteration, "\n");
    }
    for (const std::string& note : e.notes) absl::StrAppend(&out, "  note: ", note, "\n");
  }
  if (const JobAtEnd& j = report.job_at_end; j.world_size > 0 && j.epoch > 0) {
    std::vector<std::string> nodes;
    for (const auto& [node, ranks] : j.ranks_by_node) {
      nodes.push_back(absl::StrCat(node, " [", absl::StrJoin(ranks, ","), "]"));
    }
    absl::StrAppendFormat(&out, "job at end: %d ranks, DP=%d x PP=%d, epoch %d, on %s\n",
                          j.world_size, j.dp, j.pp, j.epoch, absl::StrJoin(nodes, ", "));
  }
  for (int i : report.missed_faults) absl::StrAppend(&out, "MISSED: injected #", i, "\n");
  for (int i : report.unapplied_faults) {
    absl::StrAppend(&out, "NOT APPLIED: injected #", i, ": the fault driver failed: ",
                    report.scenario.faults[static_cast<size_t>(i)].not_applied, "\n");
  }
  for (int i : report.unreached_faults) {
    absl::StrAppend(&out, "injected #", i, " not reached: the run ended at it ",
                    report.iterations_completed, " before the fault's start at it ",
                    report.scenario.faults[i].from_iteration, "\n");
  }
  absl::StrAppendFormat(&out,
                        "false alarms: %d; unexplained slowdowns: %d; cleared by themselves: %d; "
                        "run wall time %.0f s%s\n",
                        report.false_alarms, report.unexplained_slowdowns, report.cleared_slowdowns,
                        report.wall_time_s, report.interrupted ? " (interrupted)" : "");
  return out;
}

}  // namespace falcon::deploy::demo
