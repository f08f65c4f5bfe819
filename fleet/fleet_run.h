// One fleet run: starts the real falcon_controller (RocksDB in a temporary directory, gRPC on
// loopback) and `processes` fleet_agents processes that simulate the scenario's nodes as real
// gRPC agents, drives iterations until every injected fault has a verdict (plus
// `settle_iterations`) or `time_limit` passes, then measures the controller (CPU from
// /proc/<pid>/stat, peak RSS VmHWM, ingest from its metrics), reads the events from the Control
// API and judges every job: a faulted job must have exactly one event naming its fault's cause
// and culprit; a healthy job none; no agent may receive another job's directives or tasks.
#ifndef FALCON_FLEET_FLEET_RUN_H_
#define FALCON_FLEET_FLEET_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fleet/agents.h"
#include "fleet/scenario.h"

namespace falcon::fleet {

struct RunOptions {
  Scenario scenario;
  int processes = 4;  // fleet_agents processes.
  absl::Duration period = absl::Seconds(1);
  uint64_t seed = 1;
  NoiseModel noise;        // sigma and phi go to the agents.
  std::string replay_csv;  // Non-empty: replay this Alibaba PAI CSV instead of the model.
  int64_t settle_iterations = 5;
  absl::Duration time_limit = absl::Minutes(5);
  std::vector<std::string> controller_flags;  // Extra flags of the controller.
  bool peer_timing = false;  // The agents send peer transfers (fleet_agents --peer_timing).
};

struct JobResult {
  std::string job;
  uint32_t ranks = 0;
  Fault fault;
  int events = 0;
  bool right = false;            // Faulted: one event, right cause and culprit. Healthy: no event.
  std::string verdict;           // What the event said ("compute ranks=5", "-" when none).
  int64_t detection_delay = -1;  // alarm_iteration - injected onset; -1 without an event.
  int64_t controller_onset = -1;
  double alarm_to_verdict_s = -1;
  int64_t alarm_to_verdict_iterations = -1;
  int validation_tasks = 0;
  bool localized_from_profiling = false;  // The verdict came from profiling (no validation).
  double pause_fanout_ms = -1;  // Last minus first agent receiving the job's Pause directive.
};

struct RunResult {
  uint64_t ranks = 0;
  double wall_s = 0;
  // Registration: from spawning the agent processes until every simulated agent's hello was
  // answered, and the controller CPU spent meanwhile (seconds).
  double registration_s = 0;
  double registration_cpu_s = 0;
  int late_polls = 0;     // Control API polls (ListEvents) not answered within 30 s.
  double iterations = 0;  // Iterations driven (wall / period).
  double cpu_cores = 0;   // Controller CPU (utime + stime) over the wall time of the run.
  int64_t peak_rss_bytes = 0;
  double summaries_per_s = 0;  // Ingested by the controller.
  absl::Duration ack_p50, ack_p99;
  FleetReport report;
  std::vector<JobResult> jobs;
  bool all_right() const;
};

// Errors: a process that does not start or exits early, a Control API failure (kUnavailable,
// naming it); a run past time_limit is not an error (faults without verdict judge wrong).
absl::StatusOr<RunResult> RunFleet(const RunOptions& options);

}  // namespace falcon::fleet

#endif  // FALCON_FLEET_FLEET_RUN_H_
