// The demo's and the e2e suite's report: what Falcon found for a scenario run, built from the
// job's history and events as the Control API returns them (GetHistory, ListEvents), matched
// against the injected faults.
//
// Per event: cause, culprit, the injected fault's first iteration next to the detector's change
// point (onset_iteration; it can lie a few iterations before or after the fault's start), alarm /
// verdict / recovery iterations, alarm delay, actions, and the iteration times (medians of the
// job history):
//  - healthy: the latest stretch of up to 40 iterations before the change point (and before the
//    matched fault's start) that no injected fault, no earlier event and no mitigation in force
//    touches (a mitigation counts from its directive until 8 iterations after its revert, a fault
//    until 2 iterations after its end); at least 10 iterations, else there is no baseline and the
//    event says so (notes);
//  - slowed: from the later of change point + 2 and the fault's start to the first directive, or
//    to the fault's end;
//  - mitigated: from 8 iterations after the last directive until the fault clears;
//  - slowdown_recovered = (slow - mitigated) / (slow - healthy), not clamped: above 1 when the
//    mitigated time is below the healthy baseline, below 0 when the mitigation made it slower
//    (both explained in the event's notes); unset when nothing was mitigated or there is no
//    baseline.
// An event whose change point lies in no injected fault's window [from - 10, to) (among the
// faults that should raise one, InjectedFault::expect_event) is a false alarm; so is one whose
// change point comes after an S4 restart that left out the fault's culprit (an earlier event
// matched to that fault named it correctly and restarted without it: the fault no longer touches
// the job). A fault whose
// window starts after the last recorded iteration (run interrupted or cut short) is "not
// reached", not missed.
#ifndef FALCON_DEPLOY_DEMO_REPORT_H_
#define FALCON_DEPLOY_DEMO_REPORT_H_

#include <cstdint>
#include <optional>
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
  double duration_s = 0;    // Training time budget the run was sized from (--duration); 0 unset.
  double time_limit_s = 0;  // Wall-clock bound of the run (cluster start to stop).
  std::string fault_spec;
  std::string fault_injection = "in-process";  // FaultInjectionName (runner.h).
  std::string cluster = "loopback";            // cluster::ClusterKindName of the nodes.
  // The fault driver's record of what it applied and removed when (JSON; chaos/), the ground
  // truth of a kernel-fault run; "" for in-process faults.
  std::string ground_truth_json;
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
  // At or past the last recorded iteration (a directive takes effect at a later iteration than
  // it is issued at; the run ended first).
  bool after_end = false;
  std::string reason;
};

// "S2@58", "revert S2@160 (after the end)", "S3@88 (skipped)", "S2@60 (dry run)".
std::string ActionLabel(const ActionMark& action);

struct EventReport {
  uint64_t event_id = 0;
  std::string state;  // "RECOVERED", ... (EventState without the prefix).
  std::string cause;  // "COMPUTE", "COMMUNICATION", "UNKNOWN".
  std::vector<int> ranks;
  std::vector<std::pair<int, int>> links;  // (src_rank, dst_rank).
  // Nodes whose NIC is the culprit (Event.nodes, docs/algorithms.md#node-nic-faults); `links` are
  // then its evidence.
  std::vector<std::string> nodes;
  int64_t onset_iteration = -1;  // The detector's change point.
  int64_t alarm_iteration = -1;
  int64_t verdict_iteration = -1;
  int64_t recovery_iteration = -1;
  // Closed as another event's slowdown (Event.explained_by_event_id): part of that event, neither
  // a detection of its own nor a false alarm; 0 otherwise.
  uint64_t explained_by_event_id = 0;
  int64_t alarm_delay_iterations = -1;  // alarm - onset (change point).
  double alarm_delay_s = -1;            // alarm time - onset time.
  // The matched fault's first iteration; -1 for a false alarm.
  int64_t fault_start_iteration = -1;
  // alarm - fault_start_iteration; -1 for a false alarm or no alarm.
  int64_t alarm_after_fault_iterations = -1;
  std::vector<ActionMark> actions;
  // "CONFIRMED@93: reason" per state transition, as the controller recorded them.
  std::vector<std::string> transitions;
  bool rank_level = false;  // Detected on per-rank series (else the job series).
  // Localized from profiling alone (no pause); else validation_pause_s held the job paused.
  bool localized_from_profiling = false;
  // What the verdict rests on: "validation", "profiling", "peer_timing"; "" without a verdict.
  std::string evidence;
  double validation_pause_s = 0;  // 0: never paused (or still paused).
  double slowdown_ratio = 0;
  double iteration_time_healthy_s = 0;  // 0: no healthy baseline (see notes).
  // The healthy window [healthy_from, healthy_to); -1, -1 when there is none.
  int64_t healthy_from = -1;
  int64_t healthy_to = -1;
  double iteration_time_slow_s = 0;
  double iteration_time_mitigated_s = 0;  // 0: never mitigated (or not measurable).
  // (slow - mitigated) / (slow - healthy), unclamped; unset: nothing mitigated, or no baseline.
  std::optional<double> slowdown_recovered;
  // The recoverable ceiling of the last plan the event put in force (falcon.v1.Event.ceiling,
  // the controller's 1F1B cost model; docs/algorithms.md#recoverable-ceiling): its level ("S2",
  // "S2L", "S3"; empty when no plan was in force), the predicted iteration times of the job
  // healthy, slowed and under the plan, and the share of the slowdown it can recover at best,
  // (slowed - predicted) / (slowed - healthy). Unset without a plan.
  std::string ceiling_strategy;
  double iteration_time_predicted_s = 0;  // Under the plan; 0 without one.
  double ceiling_healthy_s = 0;
  double ceiling_slowed_s = 0;
  std::optional<double> recoverable_ceiling;
  // How far the measured mitigated iteration time is from the plan's prediction:
  // mitigated / predicted - 1 (+0.05: 5% slower than predicted). Unset without both.
  std::optional<double> prediction_error;
  // Why a figure is missing or out of the usual range, in words (printed under the event).
  std::vector<std::string> notes;
  int matched_fault = -1;  // Index into Scenario::faults; -1: unexplained or a false alarm.
  // Matched no fault, named no culprit (cause UNKNOWN: validation measured every part it tested
  // alike) and mitigated nothing: a slowdown of the job from outside it (load on the shared
  // machine), seen and checked but blamed on nothing. Not a false alarm (IsFalseAlarm).
  bool unexplained = false;
  // Matched no fault, named a culprit, mitigated nothing (S1 only) and RECOVERED by itself: a part
  // of the job really slowed (measured by validation or profiling) from outside it (load on the
  // shared machine) and cleared before any mitigation. Not a false alarm (IsFalseAlarm).
  bool cleared_unmitigated = false;
  bool cause_correct = false;
  bool culprit_correct = false;  // Rank or link (either direction) named as injected.
  bool link_direction_correct = false;
  // S4: the iteration the job restarted at (its S4 directive's: the checkpoint's, where the
  // survivors resumed); -1 without a restart.
  int64_t restart_iteration = -1;
};

// The job as the controller listed it at the end of the run (GetJob): after an S4 restart its new
// world, epoch and nodes.
struct JobAtEnd {
  uint32_t world_size = 0;  // 0: the job was never listed.
  uint64_t epoch = 0;
  uint32_t dp = 0;
  uint32_t pp = 0;
  std::vector<std::pair<std::string, std::vector<int>>> ranks_by_node;  // Ascending by node.
};

struct Report {
  Scenario scenario;
  RunSettings settings;
  std::vector<falcon::v1::HistoryPoint> history;  // Ascending by iteration.
  std::vector<EventReport> events;
  // Events that matched no fault and named a culprit or mitigated (IsFalseAlarm).
  int false_alarms = 0;
  // Events that matched no fault, named no culprit and mitigated nothing (EventReport.unexplained).
  int unexplained_slowdowns = 0;
  // Events that matched no fault, named a culprit, mitigated nothing and recovered by themselves
  // (EventReport.cleared_unmitigated).
  int cleared_slowdowns = 0;
  std::vector<int> missed_faults;  // Faults expected to raise an event that matched none.
  // Faults whose window starts after the last recorded iteration (never injected).
  std::vector<int> unreached_faults;
  // Faults the driver failed to apply (InjectedFault.not_applied says why): not Falcon's misses.
  std::vector<int> unapplied_faults;
  // Iterations the controller recorded (last recorded iteration + 1); the one count the summary,
  // index.html and report.json show (settings.iterations is the number planned).
  int64_t iterations_completed = 0;
  bool interrupted = false;  // Stopped by SIGINT / SIGTERM.
  double wall_time_s = 0;    // Run only (cluster start to stop).
  std::string note;          // Why the run ended early, if it did.
  // Controller restarts (Scenario::restart_controller_at_iteration): the event ids the
  // controller listed just before it, and in the last listing of the run.
  std::vector<uint64_t> event_ids_before_restart;
  std::vector<uint64_t> event_ids_at_end;
  JobAtEnd job_at_end;
};

// The job's world, epoch and ranks per node from a GetJob reply.
JobAtEnd JobAtEndOf(const falcon::v1::Job& job);

// Median of `history` iteration times (seconds) with iteration in [from, to); 0 when none.
double MedianIterationTime(const std::vector<falcon::v1::HistoryPoint>& history, int64_t from,
                           int64_t to);

// The culprit in words: "rank 5", "link 1->3", "rank 5, link 1->3"; for a node NIC fault the node,
// not its links: "node-2's NIC (12 links)"; "-" for none.
std::string CulpritText(const EventReport& event);

// Whether `event` named a culprit: a rank under cause COMPUTE or COMMUNICATION, a link or a node.
// An UNKNOWN verdict's ranks are the ranks whose own series slowed, not culprits.
bool Blamed(const EventReport& event);

// Whether `event` mitigated: an S2-S4 directive applied, not skipped, not a dry run, not a revert.
bool Mitigated(const EventReport& event);

// Whether an event that matched no fault is a false alarm: it mitigated, or it named a culprit
// that did not clear by itself (the event did not recover before any mitigation). Those that
// named no culprit are unexplained slowdowns; those whose culprit cleared by itself are cleared
// slowdowns.
bool IsFalseAlarm(const EventReport& event);

// How the event was scored, in words: "matches injected #0, cause correct, culprit correct",
// "part of event 3 (validation found only its culprit)", "UNEXPLAINED (no culprit, nothing
// mitigated)", "CLEARED BY ITSELF (...)" or "FALSE ALARM".
std::string ScoreText(const EventReport& event);

// "S2" for STRATEGY_S2_MICRO_BATCH and so on; "COMPUTE" for CAUSE_COMPUTE.
std::string StrategyName(falcon::v1::Strategy strategy);
std::string CauseName(falcon::v1::Cause cause);

// Builds the report. `history` may be in any order and hold duplicates (the latest wins).
Report BuildReport(const Scenario& scenario, const RunSettings& settings,
                   std::vector<falcon::v1::HistoryPoint> history,
                   const std::vector<falcon::v1::Event>& events);

// report.json (field names are part of the outside contract; see the header comment).
nlohmann::json ReportJson(const Report& report);

// "155 of 156 iterations": recorded (iterations_completed) of planned (settings.iterations).
std::string IterationsLine(const Report& report);

// The event's iterations in words, two lines (the second indented by two blanks): "fault from
// it 47, change point it 45 (2 it before the fault), alarm it 48 (1 it after the fault started;
// 3 it / 1.0 s after the change point)\n  verdict it 52, recovered it 152"; "-" and "not
// recovered" for what did not happen.
std::string EventTimesLine(const EventReport& event);

// "46% of the slowdown recovered", "nothing mitigated" or "share recovered not measurable".
std::string RecoveredText(const EventReport& event);

// The end-of-run summary, one block per event, for the terminal.
std::string SummaryText(const Report& report);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_REPORT_H_
