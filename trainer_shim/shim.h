// falcon::trainer_shim::Shim: the part of Falcon inside one training process (one rank).
//
// It takes op records (from the collective observer or the NCCL interposer) into a lock-free ring,
// streams them in sequenced batches to the node agent over its unix socket (AgentLink), and hands
// the agent's directives and validation tasks to the trainer at safe points. Nothing in it can
// stop training: every call returns a Status, records are dropped and counted rather than block,
// and a missing or restarting agent only delays delivery.
//
// Threads:
//   RecordOp: any thread (calls are serialized by a producer spin lock that is uncontended when,
//     as usual, one thread issues the ops); never blocks on I/O, never allocates. ~20 ns.
//   PollDirectives: the trainer's main thread at a safe point (start of an iteration, or before an
//     op outside a group); callbacks (directive handler, pause handler, validation executor) run
//     there. Not reentrant.
//   Everything else: any thread.
//   Internally: one link thread, plus one reader thread while connected.
#ifndef FALCON_TRAINER_SHIM_SHIM_H_
#define FALCON_TRAINER_SHIM_SHIM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/falcon/v1/common.pb.h"
#include "trainer_shim/agent_link.h"
#include "trainer_shim/directive_intake.h"
#include "trainer_shim/op_record.h"
#include "trainer_shim/shim_options.h"
#include "trainer_shim/spsc_ring.h"

namespace falcon::trainer_shim {

inline constexpr char kShimVersion[] = "falcon-shim/1";

class Shim : private AgentLink::Listener {
 public:
  // Applies a micro_batch_plan, topology_change or checkpoint_restart directive. OK -> acked
  // APPLIED at the poll's iteration; an error -> REJECTED with the error message as reason.
  using DirectiveHandler = std::function<absl::Status(const falcon::v1::Directive&)>;
  // Told when a pause starts (true) and ends (false), on the polling thread.
  using PauseHandler = std::function<void(bool paused)>;
  // Runs a validation task (GEMM or link pass) on the polling thread; the shim fills task_id, job
  // and rank of the result. An error becomes ValidationResult.error.
  using ValidationExecutor = std::function<absl::StatusOr<falcon::v1::ValidationResult>(
      const falcon::v1::ValidationTask&)>;

  struct Stats {
    uint64_t records_accepted = 0;      // RecordOp returned OK (= last op seq).
    uint64_t records_dropped_ring = 0;  // Ring full.
    uint64_t records_rejected = 0;      // Invalid records.
    uint64_t directives_received = 0;   // Acked RECEIVED.
    uint64_t directives_applied = 0;    // Acked APPLIED.
    uint64_t directives_rejected = 0;   // Acked REJECTED.
    uint64_t validation_tasks = 0;      // Results sent (errors included).
    uint64_t pauses = 0;                // Holds entered.
    bool paused = false;
    bool profiling = false;
    uint64_t epoch = 0;
    AgentLink::Stats link;
  };

  // kInvalidArgument from ShimOptions::Validate. Starts the link thread. `clock` (not owned; null
  // = a RealClock owned by the shim) times pauses and profiling windows.
  static absl::StatusOr<std::unique_ptr<Shim>> Create(ShimOptions options,
                                                      const common::Clock* clock = nullptr);
  ~Shim() override;
  Shim(const Shim&) = delete;
  Shim& operator=(const Shim&) = delete;

  // Accepts one op. The shim assigns record.seq (1, 2, ... over accepted records) and, when
  // record.iteration is -1, stamps the iteration of the last PollDirectives. kInvalidArgument:
  // a bad field (ValidateOpRecord), or a peer that is this rank. kResourceExhausted: ring full,
  // dropped and counted. kFailedPrecondition: after Shutdown.
  absl::Status RecordOp(OpRecord record);

  // Registers (or updates) a communicator; sent now and after every reconnect.
  // kInvalidArgument: ValidateCommunicator.
  absl::Status RegisterCommunicator(const CommunicatorInfo& communicator);

  // Iteration boundary hint. kInvalidArgument: ValidateIterationHint.
  absl::Status RecordIteration(const IterationHint& hint);

  // The safe point. `iteration` is the iteration about to start (>= 0) or -1 when unknown.
  // Runs pending validation tasks, rejects stale or late directives, then applies those due at
  // `iteration` in order: pause (holds here, running validation tasks, until a Resume arrives or
  // max_duration passes), resume, profiling, and the rest through `handler` (null: rejected as
  // unsupported). Every due directive is acked. Cheap (two atomic loads) when nothing is pending.
  // kInvalidArgument: iteration < -1. kFailedPrecondition: after Shutdown.
  // With options.agreed_directives, `agreed` holds the ids of the job-wide directives the ranks
  // agreed to apply now (null: none), whatever their effective iteration; the others wait.
  absl::Status PollDirectives(int64_t iteration, const DirectiveHandler& handler,
                              const absl::flat_hash_set<uint64_t>* agreed = nullptr);
  // options.agreed_directives: the job-wide directives this rank holds, by id.
  std::vector<DirectiveIntake::PendingId> PendingAgreed() const { return intake_.PendingAgreed(); }

  // --- Trainer-applied mode (options.trainer_applies_directives). Trainer thread. ---
  // Directives received since the last call, in arrival order, each id at most once (a
  // re-delivered id is answered by the shim with this rank's last ack). kFailedPrecondition when
  // the mode is off or after Shutdown.
  absl::StatusOr<std::vector<falcon::v1::Directive>> TakeDirectives();
  // Sends the trainer's ack for `directive`: RECEIVED, APPLIED at `applied_iteration`, or REJECTED
  // with `reason`. Each outcome of an id is sent once (repeats are dropped); a later re-delivery
  // of the id is answered with it. kInvalidArgument: status unspecified or directive_id 0.
  // kFailedPrecondition: mode off or after Shutdown.
  absl::Status AckDirective(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
                            const std::string& reason, int64_t applied_iteration);
  // Validation tasks for this rank received since the last call. kFailedPrecondition: mode off.
  absl::StatusOr<std::vector<falcon::v1::ValidationTask>> TakeValidationTasks();
  // Sends a validation result; the shim fills job and rank. kInvalidArgument: task_id 0.
  absl::Status ReportValidation(falcon::v1::ValidationResult result);
  // The iteration now running (stamps records with iteration -1). kInvalidArgument: < -1.
  absl::Status SetIteration(int64_t iteration);

  void SetPauseHandler(PauseHandler handler);
  void SetValidationExecutor(ValidationExecutor executor);

  // Whether ops should be timed with device events now (agent-controlled). Lock-free.
  bool profiling() const;
  uint64_t epoch() const { return intake_.epoch(); }
  bool paused() const { return paused_.load(std::memory_order_acquire); }
  Stats stats() const;
  const ShimOptions& options() const { return options_; }

  // Flushes to the agent (bounded by options.shutdown_flush_timeout), stops the threads and
  // releases a pause. Later calls return kFailedPrecondition. Idempotent. In a child forked from
  // the creating process it only marks the shim stopped (the threads live in the parent).
  void Shutdown();

 private:
  Shim(ShimOptions options, const common::Clock* clock);

  // AgentLink::Listener (reader thread).
  void OnWelcome(const falcon::v1::ShimWelcome& welcome) override;
  void OnDirective(const falcon::v1::Directive& directive) override;
  void OnValidationTask(const falcon::v1::ValidationTask& task) override;
  void OnProfiling(const falcon::v1::ProfilingControl& control) override;
  void OnAgentError(const falcon::v1::FieldError& error) override;

  falcon::v1::ShimHello MakeHello() const;
  void SendAck(const falcon::v1::DirectiveAck& ack);
  void ApplyProfiling(const falcon::v1::ProfilingControl& control);
  void RunValidationTasks();
  // Acks `pause` APPLIED once held, then holds until a Resume, max_duration or Shutdown.
  void Hold(const falcon::v1::Directive& pause, int64_t iteration, bool resume_follows);
  void NotifyHold();
  void Log(std::string_view message) const;
  // kInvalidArgument naming the field; used for tasks this rank takes part in.
  absl::Status CheckValidationTask(const falcon::v1::ValidationTask& task) const;

  const ShimOptions options_;
  std::unique_ptr<common::Clock> owned_clock_;
  const common::Clock* const clock_;

  // Producer side of RecordOp.
  std::atomic<bool> producer_lock_{false};
  std::atomic<uint64_t> next_seq_{0};
  std::atomic<uint64_t> ring_dropped_{0};
  std::atomic<uint64_t> records_rejected_{0};
  std::atomic<int64_t> current_iteration_{-1};
  std::atomic<bool> stopped_{false};
  SpscRing<OpRecord> ring_;

  DirectiveIntake intake_;
  std::atomic<bool> profiling_{false};
  std::atomic<int64_t> profiling_until_ns_{0};  // 0: no limit.
  std::atomic<bool> paused_{false};
  const int owner_pid_;  // Shutdown in a forked child only marks the shim stopped.

  mutable absl::Mutex mu_;
  PauseHandler pause_handler_ ABSL_GUARDED_BY(mu_);
  ValidationExecutor validation_executor_ ABSL_GUARDED_BY(mu_);
  std::deque<falcon::v1::ValidationTask> validation_tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::Directive> trainer_directives_ ABSL_GUARDED_BY(mu_);
  uint64_t hold_events_ ABSL_GUARDED_BY(mu_) = 0;
  Stats counters_ ABSL_GUARDED_BY(mu_);  // Directive, validation and pause counters.
  std::atomic<bool> validation_pending_{false};

  std::unique_ptr<AgentLink> link_;  // Last member: its threads use everything above.
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_SHIM_H_
