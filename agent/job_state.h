// What the agent knows about one job with ranks on this node: its layout, the ranks and their
// shim sessions, communicators, profiling state, directives awaiting acks, and its reducer.
// Plain data owned by ShimHub (guarded by the hub's mutex).
#ifndef FALCON_AGENT_JOB_STATE_H_
#define FALCON_AGENT_JOB_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "agent/agent_metrics.h"
#include "agent/reduce/job_reducer.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::agent {

// Profiling switched on by the controller, until `until_ns` (agent monotonic; 0 = until told).
struct ProfilingWindow {
  bool enabled = false;
  int64_t until_ns = 0;
  bool ActiveAt(int64_t now_ns) const { return enabled && (until_ns == 0 || now_ns < until_ns); }
};

// An op batch accepted from a rank's shim and not yet delivered: what decides when it is (see
// ShimHub, delivery).
struct PendingOpBatch {
  uint64_t sequence = 0;
  int64_t max_iteration = -1;           // Highest stamped iteration of its records; -1 none.
  int64_t max_unstamped_start_ns = -1;  // Latest start of its unstamped records; -1 none.
  int64_t max_start_ns = -1;            // Latest start of any of its records; -1 none.
};

struct RankState {
  v1::RankInfo info;
  uint64_t generation = 0;       // Rank session number, unique in the hub.
  uint64_t session_id = 0;       // Live session; 0 when none.
  uint64_t acked_batch_seq = 0;  // Highest OpBatch.sequence accepted in this rank session.
  uint64_t last_op_seq = 0;      // Highest OpRecord.seq accepted.
  int64_t last_hint_iteration = -1;
  ProfilingWindow profiling;                     // Rank-specific profiling.
  std::deque<v1::Directive> unacked_directives;  // Re-delivered on reconnect until acked.
  std::vector<v1::OpRecord> raw_ops;             // Waiting to be streamed while profiling.
  uint64_t dropped_reported = 0;                 // Unassigned+overflow already exported.
  // Delivery: accepted batches the controller does not have yet (oldest first), and the
  // watermarks sent to the shim in DeliveryAck.
  std::deque<PendingOpBatch> undelivered;
  uint64_t delivered_sequence = 0;
  int64_t delivered_iteration = -1;  // Highest iteration whose summary the controller has.
  int64_t delivered_end_ns = -1;     // Latest end (host monotonic) of a delivered iteration.
  // An earlier agent delivered every iteration up to this one (ShimHello.delivered_iteration):
  // resent stamped ops and hints at or below it are skipped. -1 none.
  int64_t resumed_after = -1;
  AgentMetrics::RankSeries metrics;
};

struct JobState {
  JobState(const std::string& name, reduce::JobReducer::Options options)
      : name(name), reducer(options) {}

  std::string name;
  uint32_t world_size = 0;
  uint32_t dp_size = 0;
  uint32_t pp_size = 0;
  uint32_t tp_size = 0;
  uint32_t global_micro_batches = 0;
  // The model's pipeline shape (ShimHello.pipeline_blocks, block_state_bytes; 0 unknown): every
  // rank of an epoch reports the same (ShimHub refuses a hello that disagrees).
  uint32_t pipeline_blocks = 0;
  uint64_t block_state_bytes = 0;
  uint64_t epoch = 0;
  // The uid of the shim that first attached to the job here (ShimHub::kUnknownUid: unknown):
  // shims of other uids may not attach to its ranks while the agent keeps the job.
  uint32_t owner_uid = 0;
  std::map<uint32_t, RankState> ranks;         // Ranks on this node.
  std::map<uint64_t, v1::Communicator> comms;  // Registered by those ranks.
  // comm id -> the ranks here whose current process registered it. A rank's new process (a
  // relaunch, e.g. in an S3 layout) takes its old process's registrations away; a communicator
  // no process registers any more leaves `comms`.
  std::map<uint64_t, std::set<uint32_t>> comm_ranks;
  ProfilingWindow profile_all;  // Profiling for every rank of the job.
  absl::flat_hash_map<uint64_t, int64_t> directive_plan_versions;  // directive_id -> plan.
  std::deque<uint64_t> directive_order;  // Bounds directive_plan_versions.
  bool registration_dirty = true;
  int64_t last_active_ns = 0;  // Last time a session was live.
  reduce::JobReducer reducer;
  uint64_t dropped_unassigned_reported = 0;
  uint64_t dropped_overflow_reported = 0;
  AgentMetrics::JobSeries metrics;

  bool Profiling(uint32_t rank, int64_t now_ns) const;
  size_t LiveSessions() const;
  v1::JobRegistration Registration() const;
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_JOB_STATE_H_
