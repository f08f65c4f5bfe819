// The demo's and the e2e suite's report: what Falcon found for a scenario run, built from the
// job's history and events as the Control API returns them (GetHistory, ListEvents), matched
// against the injected faults.
//
// Per event: cause, culprit, onset / alarm / verdict iterations, alarm delay, actions, and the
// iteration time healthy (median over the window before onset), slowed (median from onset to the
// first directive, or to the fault's end) and mitigated (median after the last directive has
// settled, until the fault clears), and the share of the slowdown recovered:
//   slowdown_recovered = clamp((slow - mitigated) / (slow - healthy), 0, 1)   (0 when unmitigated).
// An event whose detected onset lies in no injected fault's window [from - 10, to) (among the
// faults that should raise one, InjectedFault::expect_event) is a false alarm.
#ifndef FALCON_DEPLOY_DEMO_REPORT_H_
#define FALCON_DEPLOY_DEMO_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deploy/demo/scenario.h"
#include "nlohmann/json.hpp"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::deploy::demo {

// How the run was set up (recorded in report.json "settings").
struct RunSettings {
  std::string scenario;
  Layout layout;
  int nodes = 4;
  int64_t iterations = 0;  // Steps asked of the trainer.
  int micro_batches = 0;
  double emulated_compute_ms = 0;
  double duration_s = 0;  // Wall-clock bound of the run.
  std::string fault_spec;
  std::vector<std::string> train_args;
  falcon::v1::Settings controller_settings;  // Applied through SetSettings.
  int64_t warmup_iterations = 0;             // Detection off before this iteration.
};

struct ActionMark {
  std::string strategy;  // "S1".."S4".
  int64_t iteration = 0;
  bool revert = false;
  bool dry_run = false;
  // A rung the escalation considered but skipped (no directive; reason starts "skip:").
  bool skipped = false;
  std::string reason;
};

struct EventReport {
  uint64_t event_id = 0;
  std::string state;  // "RECOVERED", ... (EventState without the prefix).
  std::string cause;  // "COMPUTE", "COMMUNICATION", "UNKNOWN".
  std::vector<int> ranks;
  std::vector<std::pair<int, int>> links;  // (src_rank, dst_rank).
  int64_t onset_iteration = -1;
  int64_t alarm_iteration = -1;
  int64_t verdict_iteration = -1;
  int64_t recovery_iteration = -1;
  int64_t alarm_delay_iterations = -1;  // alarm - onset.
  double alarm_delay_s = -1;            // alarm time - onset time.
  std::vector<ActionMark> actions;
  // "CONFIRMED@93: reason" per state transition, as the controller recorded them.
  std::vector<std::string> transitions;
  bool rank_level = false;  // Detected on per-rank series (else the job series).
  double slowdown_ratio = 0;
  double iteration_time_healthy_s = 0;
  double iteration_time_slow_s = 0;
  double iteration_time_mitigated_s = 0;  // 0: never mitigated (or not measurable).
  double slowdown_recovered = 0;          // [0, 1].
  int matched_fault = -1;                 // Index into Scenario::faults; -1 false alarm.
  bool cause_correct = false;
  bool culprit_correct = false;  // Rank or link (either direction) named as injected.
  bool link_direction_correct = false;
};

struct Report {
  Scenario scenario;
  RunSettings settings;
  std::vector<falcon::v1::HistoryPoint> history;  // Ascending by iteration.
  std::vector<EventReport> events;
  int false_alarms = 0;
  std::vector<int> missed_faults;  // Faults expected to raise an event that matched none.
  bool interrupted = false;        // Stopped by SIGINT / SIGTERM.
  double wall_time_s = 0;          // Run only (cluster start to stop).
  std::string note;                // Why the run ended early, if it did.
  // Controller restarts (Scenario::restart_controller_at_iteration): the event ids the
  // controller listed just before it, and in the last listing of the run.
  std::vector<uint64_t> event_ids_before_restart;
  std::vector<uint64_t> event_ids_at_end;
};

// Median of `history` iteration times (seconds) with iteration in [from, to); 0 when none.
double MedianIterationTime(const std::vector<falcon::v1::HistoryPoint>& history, int64_t from,
                           int64_t to);

// "S2" for STRATEGY_S2_MICRO_BATCH and so on; "COMPUTE" for CAUSE_COMPUTE.
std::string StrategyName(falcon::v1::Strategy strategy);
std::string CauseName(falcon::v1::Cause cause);

// Builds the report. `history` may be in any order and hold duplicates (the latest wins).
Report BuildReport(const Scenario& scenario, const RunSettings& settings,
                   std::vector<falcon::v1::HistoryPoint> history,
                   const std::vector<falcon::v1::Event>& events);

// report.json (field names are part of the outside contract; see the header comment).
nlohmann::json ReportJson(const Report& report);

// The end-of-run summary, one block per event, for the terminal.
std::string SummaryText(const Report& report);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_REPORT_H_
