// The agent's core: shim sessions, per-job state and edge reduction, and routing between shims
// and the controller. Transport-free: the gRPC layer (ShimService) feeds it stream events, and it
// answers through ShimStream; messages for the controller go to a ControllerSink.
//
// Shim protocol (shim.proto): the first message of a stream must be a ShimHello; the hub answers
// ShimWelcome{session_id, acked_sequence, profiling, delivery_acks, hinted_iteration}. OpBatch ->
// OpBatchAck{sequence}; batches at or below the rank session's acked sequence are acknowledged
// again and ignored (dedup). A rank
// session is (job, rank, pid): a new pid (restarted trainer) starts a new one; a second stream of
// the same rank supersedes the first, which is closed with ABORTED. A malformed message is
// answered with AgentToShim.error (FieldError naming the field) and ignored; the stream stays open
// and other sessions are unaffected.
//
// Delivery (ShimWelcome.delivery_acks, DeliveryAck): a shim keeps what the agent accepted until
// the agent says the controller has it, so a killed agent loses nothing. Per rank session the hub
// keeps the accepted op batches not yet delivered; Flush tags each summary batch it makes, and
// OnSettled (the TelemetryBuffer's settle callback: acknowledged by the controller, or dropped
// and counted) raises the rank's delivered iteration. A batch is delivered once every record in
// it belongs to a delivered iteration: stamped records by their iteration, the others by start
// time before the end of the delivered iteration (with hints; without hints all go by start
// time). DeliveryAck{sequence, iteration} then goes to the live session (and again after every
// reattach). A shim that reattaches to a new agent says what was delivered before
// (ShimHello.delivered_iteration): the hub skips resent stamped records and hints at or below it
// and the reducer resumes after it (JobReducer::ContinueAfter).
//
// Controller side: directives go to the live sessions of their target ranks (all local ranks of
// the job when none are named) and are re-delivered on reconnect until the rank acknowledges;
// validation tasks go to their local ranks, and a local rank without a live session gets an error
// result at once; profiling control switches raw-op streaming and is forwarded to the shims.
//
// Thread-safe. ShimStream::Send and ControllerSink::Send are called with the hub's mutex held and
// must not block or call back into the hub.
#ifndef FALCON_AGENT_SHIM_HUB_H_
#define FALCON_AGENT_SHIM_HUB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/job_state.h"
#include "agent/reduce/job_reducer.h"
#include "common/clock.h"
#include "proto/falcon/v1/shim.pb.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::agent {

// One shim stream as the hub sees it.
class ShimStream {
 public:
  virtual ~ShimStream() = default;
  // Queues a message to the shim; never blocks.
  virtual void Send(const v1::AgentToShim& msg) = 0;
  // Ends the stream with `status` (after queued messages).
  virtual void Close(const absl::Status& status) = 0;
};

// Messages for the controller (validation results, directive acks).
class ControllerSink {
 public:
  virtual ~ControllerSink() = default;
  virtual void Send(v1::AgentMessage msg) = 0;
};

class ShimHub {
 public:
  struct Options {
    std::string node;  // This node's name.
    reduce::JobReducer::Options reduce;
    size_t max_raw_ops_per_rank = 1 << 20;  // Raw ops held per rank while profiling.
    int max_ops_per_batch = 65536;          // Raw ops per TelemetryBatch.
    int max_summaries_per_batch = 65536;    // Summaries per TelemetryBatch.
    size_t max_unacked_directives = 64;     // Per rank; oldest dropped.
    // Accepted op batches awaiting delivery, per rank; beyond it the oldest counts as delivered
    // (the shim may forget it: lost only if the agent dies before delivering it).
    size_t max_undelivered_batches = 65536;
    absl::Duration job_idle_timeout = absl::Minutes(10);  // Forget jobs without sessions.
  };

  struct Stats {
    uint64_t sessions_opened = 0;
    uint64_t errors = 0;                       // Malformed messages answered with FieldError.
    uint64_t owner_refusals = 0;               // Hellos for a job another uid holds.
    uint64_t duplicate_batches = 0;            // Op batches at or below the acked sequence.
    uint64_t superseded = 0;                   // Sessions replaced by a newer one of the same rank.
    uint64_t ignored_controller_messages = 0;  // For jobs or ranks not on this node.
    uint64_t skipped_delivered_ops = 0;        // Resent records an earlier agent had delivered.
    uint64_t skipped_delivered_hints = 0;      // Resent hints an earlier agent had delivered.
    uint64_t undelivered_overflow = 0;         // Batches released at max_undelivered_batches.
    uint64_t delivery_acks = 0;                // DeliveryAck messages sent.
    uint64_t job_restarts = 0;                 // Jobs relaunched on a new layout (RestartJob).
    uint64_t refused_draining = 0;             // Hellos, op batches, hints after StopAccepting.
    // Communicators dropped because no current process registers them: every rank here that
    // did got a new process (a relaunch, e.g. in an S3 layout).
    uint64_t stale_comms = 0;
  };

  // `metrics` and `sink` must outlive the hub.
  // REQUIRES: reduce::JobReducer::Validate(options.reduce).ok().
  ShimHub(Options options, const common::Clock& clock, AgentMetrics* metrics, ControllerSink* sink);
  ~ShimHub();

  // The uid of a stream whose peer is not known (in-process transports, tests).
  static constexpr uint32_t kUnknownUid = static_cast<uint32_t>(-1);

  // --- Shim streams (from the transport) ---
  // A new stream of a shim running as `uid`; returns its session id (> 0). `stream` must stay
  // valid until OnClosed. A job belongs to the uid of the first shim that attaches to it here,
  // while the hub keeps the job (until job_idle_timeout after its last session): a hello of
  // another uid for it ends the stream with PERMISSION_DENIED (logged, counted at
  // where=shim_job_owner_refused) and changes nothing. A hello with another world_size than the
  // job's here is refused, unless its epoch is newer: the job relaunched on a new layout (an S4
  // restart), and its state here starts over (what the old ranks reported is still delivered).
  // A hello from a rank's new process (another pid: a relaunch, e.g. in an S3 layout with the
  // same world_size) takes the old process's communicator registrations away; a communicator no
  // current process here registers leaves the job's registration (the new processes register
  // theirs).
  uint64_t Open(ShimStream* stream, uint32_t uid = kUnknownUid) ABSL_LOCKS_EXCLUDED(mu_);
  void OnMessage(uint64_t session, const v1::ShimMessage& msg) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream ended; the hub stops using its ShimStream.
  void OnClosed(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);

  // --- Controller messages ---
  void OnDirective(const v1::Directive& directive) ABSL_LOCKS_EXCLUDED(mu_);
  void OnValidationTask(const v1::ValidationTask& task) ABSL_LOCKS_EXCLUDED(mu_);
  void OnProfiling(const v1::ProfilingControl& control) ABSL_LOCKS_EXCLUDED(mu_);

  // --- Telemetry ---
  // Appends batches for the controller: per job, the summaries of iterations complete by now,
  // ordered by iteration then rank (and the registration when it changed), and raw op records of
  // profiled ranks. `drain`: flush
  // everything complete or not (shutdown). Also expires profiling windows and idle jobs.
  // `delivery_tags` (optional): one tag per batch appended to `out` (0: nothing to report); pass
  // each to OnSettled once its batch has left the TelemetryBuffer (acknowledged or dropped).
  void Flush(bool drain, std::vector<v1::TelemetryBatch>* out,
             std::vector<uint64_t>* delivery_tags = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // The batches of these tags settled: raises the delivered iterations of their ranks and sends
  // DeliveryAck to the shims whose batches are now delivered. Unknown tags are ignored.
  void OnSettled(const std::vector<uint64_t>& tags) ABSL_LOCKS_EXCLUDED(mu_);
  // Every job with ranks here, for AgentHello.
  std::vector<v1::JobRegistration> Registrations() const ABSL_LOCKS_EXCLUDED(mu_);

  // Drain, first step: from now on the hub takes no new telemetry. A hello is answered by closing
  // its stream with UNAVAILABLE; op batches and iteration hints are ignored without an ack (the
  // shims keep them and resend them to the next agent) and counted (Stats.refused_draining). Live
  // sessions stay open, so the DeliveryAcks of the final flush still reach them. Idempotent.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);
  // Closes every live stream with `status` (drain, last step).
  void CloseAll(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  size_t live_sessions() const ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reduction stats of one job (zeros when unknown).
  reduce::JobReducer::Stats job_stats(const std::string& job) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Session {
    ShimStream* stream = nullptr;
    bool hello = false;
    bool superseded = false;
    uint32_t uid = kUnknownUid;
    std::string job;
    uint32_t rank = 0;
  };

  void Error(Session& s, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleHello(uint64_t id, Session& s, const v1::ShimHello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleCommunicator(Session& s, JobState& job, const v1::Communicator& comm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `rank` has a new process (`hello`): its old process's communicator registrations go.
  void DropCommsOf(JobState& job, uint32_t rank, const v1::ShimHello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleOpBatch(Session& s, JobState& job, RankState& rank, const v1::OpBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDirectiveAck(Session& s, JobState& job, RankState& rank, const v1::DirectiveAck& ack)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobState& GetOrCreateJob(const v1::ShimHello& hello) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kInvalidArgument naming the field and the rank when `hello` reports another model
  // (pipeline_blocks, block_state_bytes; 0 is unknown, never a disagreement) than `job`'s other
  // ranks at its epoch.
  static absl::Status SameModel(const JobState& job, const v1::ShimHello& hello);
  // Sends to the live session of (job, rank), if any; returns whether there was one.
  bool SendToRank(const JobState& job, uint32_t rank, const v1::AgentToShim& msg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyProfiling(JobState& job, const v1::ProfilingControl& control, int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushJob(JobState& job, bool drain, int64_t now_ns, std::vector<v1::TelemetryBatch>* out,
                std::vector<uint64_t>* delivery_tags) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops the rank's delivered batches and, when a watermark moved (or `always`), sends
  // DeliveryAck to its live session.
  void AdvanceDelivery(const JobState& job, RankState& rank, uint32_t rank_id, bool always)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job relaunched on a new layout (an S4 restart: a hello at a newer epoch with another
  // world_size): drains what its old ranks reported into carried_, closes their sessions and
  // replaces `slot` with a fresh state for the new layout (keeping the job's owner, metrics,
  // profiling and directive plan versions).
  void RestartJob(std::unique_ptr<JobState>& slot, const v1::ShimHello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveJob(std::map<std::string, std::unique_ptr<JobState>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateSessionGauge() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const common::Clock& clock_;
  AgentMetrics* const metrics_;
  ControllerSink* const sink_;

  mutable absl::Mutex mu_;
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<JobState>> jobs_ ABSL_GUARDED_BY(mu_);
  // What each tagged summary batch delivers once it settles: per rank, its highest iteration.
  struct DeliveryMark {
    std::string job;
    uint32_t rank = 0;
    uint64_t generation = 0;  // Rank session the summaries came from.
    int64_t iteration = 0;
    int64_t end_ns = 0;
  };
  absl::flat_hash_map<uint64_t, std::vector<DeliveryMark>> marks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_tag_ ABSL_GUARDED_BY(mu_) = 1;
  // Batches (and their delivery tags) drained from jobs that restarted, for the next Flush.
  std::vector<v1::TelemetryBatch> carried_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> carried_tags_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_SHIM_HUB_H_
