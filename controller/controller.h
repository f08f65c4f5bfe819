// The controller's core: the composition root of the managers (registry, settings, detection,
// events, localization, directives) and the logic of the agent stream (telemetry.proto) and the
// periodic tick. The gRPC adapters (service/) only translate to and from these calls, and run
// them on the controller loop (service/event_loop.h): nothing here is thread-safe.
//
// Agent stream, per telemetry.proto: AgentHello first -> ControllerHello{acked_sequence =
// highest contiguous stored sequence of that agent}; every TelemetryBatch is validated, stored
// with its dedup mark in one atomic write and acknowledged (BatchAck{sequence}) once that write is
// durable; a duplicate (agent_id, sequence) is acknowledged and not applied; a malformed batch is
// acknowledged with a FieldError naming the field and not applied, and the stream stays open.
//
// Durable acks: every message to agents waits in the AgentHub until the store has synced the
// state it announces (SyncStore). Without group_commit each unit of work syncs at once; with it,
// the owner calls SyncStore after a burst of messages (the controller loop does, after the tasks
// queued at once), so one fsync covers many batches. A failed write or sync never advances an
// acknowledged sequence: the batch's stream ends with UNAVAILABLE (the agent resends it after
// reconnecting), the failure is logged and counted (errors_total{where="batch_commit"}), and
// until the store has recovered and stored what it missed (ControllerStore) every hello, batch,
// result, ack and tick is refused or skipped.
//
// Agent restarts (docs/architecture.md#agent-restarts): an agent whose stream ends, or whose
// hello does not list a job it had, is away from that job; the job, its open event and its
// directives stay as they are. The agent takes the job back by registering it again (hello or
// batch; its registrations then add to its earlier part for the grace), and its PENDING
// directives and profiling are sent again then. Tick ends a job all of whose agents have been
// away for job_end_grace, and removes the part of an agent connected but away that long.
//
// Peer checks (docs/operations.md#peer-checks): an agent acts only on what it owns. A hello for
// an agent id live on another stream, a hello whose first_unacked_sequence lies more than
// kMaxSequenceGap beyond the highest sequence the store holds of that agent, and a registration
// that raises a job's epoch by more than kMaxEpochStep, or raises it from an agent without a part
// in the job while an agent with a part reports it, are refused: the hello's stream ends with
// PERMISSION_DENIED, a batch's registration gets a FieldError. Validation results and directive
// acks for ranks the stream's agent does not hold are dropped. Every refusal names the field and
// the peer, is logged (what, job, agent, peer) and counted in
// falcon_controller_peer_refusals_total{check}; it changes nothing.
//
// Bounded state (docs/operations.md#retention-and-limits): a hello beyond a ResourceLimits limit
// ends its stream with RESOURCE_EXHAUSTED (a batch's registration beyond one is rejected with a
// FieldError saying so); a stream on which nothing arrives for stream_idle_timeout is closed and
// its agent marked disconnected; ended jobs, events and directives are purged a retention period
// after they ended, by the tick, in batches.
#ifndef FALCON_CONTROLLER_CONTROLLER_H_
#define FALCON_CONTROLLER_CONTROLLER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/error_counter.h"
#include "controller/core/agent_hub.h"
#include "controller/core/audit_trail.h"
#include "controller/core/directive_issuer.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/detection/detection_manager.h"
#include "controller/detection/event_manager.h"
#include "controller/detection/imbalance_tracker.h"
#include "controller/detection/localizer.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/ingest/sequence_tracker.h"
#include "controller/ingest/telemetry_validator.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/registry/job_presence.h"
#include "controller/registry/job_registry.h"
#include "controller/resource_limits.h"
#include "controller/settings/settings_manager.h"
#include "controller/store/controller_store.h"
#include "controller/store/kv_store.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller {

// How long ended state is kept.
struct RetentionOptions {
  // Ended jobs (with their events, directives, history, samples and settings overrides), and the
  // recovered or closed events and final directives of running jobs, are purged from memory and
  // store this long after they ended. > 0. Default: 24 h.
  absl::Duration retention = absl::Hours(24);
  // Most items (jobs, events, directives) purged in one store write and log line; while more are
  // due, the next tick purges the next batch. [1, 1000000]. Default: 1000.
  size_t purge_batch = 1000;

  absl::Status Validate() const;
  // How often the tick looks for expired state: retention / 10, at most a minute.
  absl::Duration SweepInterval() const;
};

// Largest rise of a job's epoch one registration may claim (a restart raises it by one).
inline constexpr uint64_t kMaxEpochStep = 1024;
// How far beyond the highest sequence the store holds of an agent its hello's
// first_unacked_sequence may lie (batches numbered but lost with a broken stream):
// the window of sequences the controller remembers above its watermark.
inline constexpr uint64_t kMaxSequenceGap = ingest::SequenceTracker::kMaxStoredAbove;

struct ControllerOptions {
  std::string controller_id = "falcon-controller";  // ControllerHello.controller_id.
  ingest::IngestLimits limits;
  ResourceLimits resource_limits;
  RetentionOptions retention;
  // An agent stream on which nothing (no message, no heartbeat) arrives for this long is closed
  // with UNAVAILABLE and its agent marked disconnected. Must exceed the agents' heartbeat
  // interval (5 s by default). > 0 (infinite: never). Default: 60 s.
  absl::Duration stream_idle_timeout = absl::Seconds(60);
  detection::DetectionOptions detection;
  detection::LocalizationOptions localization;
  // Workload imbalance per job (docs/algorithms.md#workload-imbalance).
  detection::ImbalanceTrackerOptions imbalance;
  core::DirectiveOptions directives;
  // A job none of whose agents reports it for this long ends (its active event closes); an agent
  // away from a job this long (connected without re-registering it) loses its part of the job.
  // Within it a restarted agent takes its jobs back as its shims reattach
  // (registry/job_presence.h).
  absl::Duration job_end_grace = absl::Seconds(120);
  // false: every unit of work is made durable (synced) before its messages leave. true: the owner
  // calls SyncStore to release them (group commit). Control API writes always sync at once.
  bool group_commit = false;
  // A stored sample row that does not parse: false, the controller refuses to start (DATA_LOSS
  // naming the row); true (--store_repair), the row is dropped, logged and counted.
  bool drop_damaged_samples = false;

  absl::Status Validate() const;
};

// One agent stream as the controller sees it. Owned by the stream adapter.
struct AgentSession {
  std::shared_ptr<core::AgentChannel> channel;  // Where replies go.
  std::string agent_id;                         // Set by the hello.
  std::string node;
  std::string peer;  // The stream's peer address, for log lines (set by the adapter).
  // Whether the peer presented a verified TLS certificate, and the names it proves (its SAN DNS
  // names, else its CN); set by the adapter. Without TLS there is no identity to check.
  bool authenticated = false;
  std::vector<std::string> identities;
  std::string role;  // The certificate's OU ("node"; "operator"/"viewer" are users').
  uint64_t hub_session = 0;
  bool hello_done = false;
  // Set by the controller: when the latest message arrived, and whether the stream has ended for
  // it (OnAgentDisconnected ran, or the idle timeout closed it).
  absl::Time last_message;
  bool ended = false;
};

class Controller {
 public:
  // Loads every table and resumes open events. `kv`, `clock` and `metrics` must outlive the
  // controller; `hook` (may be null: verdicts end at LOCALIZED, i.e. S1) too.
  // Errors: kInvalidArgument for bad options; store errors (kDataLoss on a corrupt record).
  static absl::StatusOr<std::unique_ptr<Controller>> Create(
      const ControllerOptions& options, store::KvStore* kv, const common::Clock* clock,
      metrics::ControllerMetrics* metrics, detection::MitigationHook* hook = nullptr);
  ~Controller();

  // A stream opened: from now on the idle timeout applies to it. `session` must stay valid until
  // OnAgentDisconnected(session). Streams never announced (in-process tests) have no idle timeout.
  void OnAgentConnected(AgentSession* session);
  // One message of an agent stream. OK: keep reading. An error ends the stream with it:
  // kInvalidArgument / kFailedPrecondition for a protocol violation (a hello that is malformed or
  // comes twice, data before the hello), kResourceExhausted for a hello beyond a ResourceLimits
  // limit, kUnavailable when the store failed (the agent resends) or the stream was already closed
  // by the idle timeout.
  absl::Status OnAgentMessage(AgentSession* session, const falcon::v1::AgentMessage& message);
  // The stream ended. Idempotent.
  void OnAgentDisconnected(AgentSession* session);
  // Idle streams; timeouts (localization phases, directive acks, job end) and the retention sweep,
  // skipped while the store is failed and cannot recover yet. Call about once a second.
  void Tick();
  // Makes what was committed durable and sends the messages that waited for it. While the store
  // is failed, tries to recover it (ControllerStore::Sync). Errors: kUnavailable.
  absl::Status SyncStore();
  // Figures of what the controller holds (recorded with each sync, compared after a repair):
  // jobs, events, directives, batches (the sum of the agents' acknowledged sequences).
  store::StoreFigures Figures() const;
  // The same figures of what `store` holds (before a controller loads and acts on it).
  // Errors: those of the loaders.
  static absl::StatusOr<store::StoreFigures> StoredFigures(const store::ControllerStore& store);

  // Managers, for the Control API and tests.
  const registry::JobRegistry& registry() const { return registry_; }
  const settings::SettingsManager& settings() const { return settings_; }
  detection::EventManager& events() { return events_; }
  const detection::EventManager& events() const { return events_; }
  const detection::DetectionManager& detection() const { return detection_; }
  const core::DirectiveIssuer& directives() const { return directives_; }
  const core::AgentHub& hub() const { return hub_; }
  const store::ControllerStore& store() const { return store_; }
  const common::Clock& clock() const { return *clock_; }
  const ControllerOptions& options() const { return options_; }

  // The Job the Control API serves: the registration plus the live figures.
  falcon::v1::Job JobView(const registry::JobEntry& job) const;
  // Control API writes. Errors: kInvalidArgument naming the field; kFailedPrecondition;
  // kUnavailable when the store failed.
  absl::StatusOr<falcon::v1::Settings> SetSettings(const falcon::v1::Settings& update);
  absl::StatusOr<uint64_t> ForceValidation(const std::string& job);
  // The mitigation hook's dry run of the job's active event (MitigationHook::DryRun); acts on
  // nothing. kNotFound without an active event or hook state; kUnimplemented without a hook.
  absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRunActive(const std::string& job);

  // Records one call of a mutating Control RPC (docs/operations.md#authorization-and-audit): gives
  // it an audit id, stores it in the audit table and writes one log line (`control call audited
  // ...`). A record the store cannot take yet is kept for when it recovers (logged and counted at
  // where=audit_commit). Returns the record as stored.
  falcon::v1::AuditRecord RecordAudit(falcon::v1::AuditRecord record);
  const core::AuditTrail& audit() const { return audit_; }

 private:
  class Actions;  // EventActions bound to one unit of work.

  Controller(const ControllerOptions& options, store::KvStore* kv, const common::Clock* clock,
             metrics::ControllerMetrics* metrics, detection::MitigationHook* hook,
             falcon::controller::v1::MetaRecord meta);
  absl::Status Load();
  absl::Status OnHello(AgentSession* session, const falcon::v1::AgentHello& hello);
  absl::Status OnBatch(AgentSession* session, const falcon::v1::TelemetryBatch& batch);
  absl::Status Reject(AgentSession* session, uint64_t sequence, falcon::v1::FieldError error);
  void OnValidationResult(const AgentSession& session, const falcon::v1::ValidationResult& result);
  void OnDirectiveAck(const AgentSession& session, const falcon::v1::DirectiveAck& ack);
  // Peer checks (see the file comment). RefuseClaim logs and counts a refusal and returns its
  // message "<field>: <why> (agent '<agent>', peer <peer>)" (a hello's stream ends with it as
  // PERMISSION_DENIED).
  std::string RefuseClaim(const AgentSession& session, const char* check, absl::string_view field,
                          absl::string_view job, absl::string_view agent, absl::string_view why);
  // Why `agent_id` may not register `reg` (the `check`, the field under `path`); nullopt: it may.
  struct Claim {
    const char* check;
    std::string field;
    std::string why;
  };
  std::optional<Claim> CheckRegistrationClaim(const std::string& agent_id,
                                              const falcon::v1::JobRegistration& reg,
                                              const std::string& path) const;
  // --store_repair: drops (logs, counts, deletes in one commit) every stored sample row that
  // does not parse. Errors: store errors.
  absl::Status DropDamagedSamples();
  // The first rank of `batch` (summary, op_rank with ops, rank_ops) that the stream's agent does
  // not hold (HoldsRank), as a claim naming the field; nullopt when it holds every one.
  std::optional<Claim> CheckBatchRanks(const AgentSession& session, const registry::JobEntry& job,
                                       const falcon::v1::TelemetryBatch& batch) const;
  // The stream's agent holds `rank` of `job` (or nobody does and the agent has a part in it).
  bool HoldsRank(const AgentSession& session, const registry::JobEntry* job, uint32_t rank) const;
  void EndJob(registry::JobEntry* job, const std::string& reason, core::UnitOfWork* uow);
  // After a new imbalance analysis of `job`: the gauge, and a log line when findings change.
  void ImbalanceAnalysed(const registry::JobEntry& job);
  // `agent_id` stopped reporting `job` (`why`): logs it, and when no agent reports the job any
  // more, when it will end.
  void MarkAway(const registry::JobEntry& job, const std::string& agent_id, absl::string_view why);
  // `agent_id` reports `job` again: logs how long it was away, re-sends its PENDING directives
  // and profiling. No-op when it was not away.
  void MarkBack(const registry::JobEntry& job, const std::string& agent_id);
  // Ends jobs unreported for the grace; removes the parts of agents away for it.
  void ExpireAbsences(absl::Time now, core::UnitOfWork* uow);
  // `reg` of `agent_id`, completed with its earlier part while it rejoins the job.
  falcon::v1::JobRegistration Rejoined(const std::string& agent_id,
                                       const falcon::v1::JobRegistration& reg) const;
  void PersistAgent(const std::string& agent_id, core::UnitOfWork* uow);
  // After a registration merged into `job`: when it came back at a newer epoch with another world
  // size than `before` (a relaunch on a new layout: an S4 restart without the excluded ranks),
  // its detectors start over, as for a new job: the new layout has a healthy level of its own
  // (docs/algorithms.md#s4-checkpoint-and-restart).
  void StartOverIfRelaunched(const registry::JobEntry& job, const falcon::v1::Job& before,
                             core::UnitOfWork* uow);
  void DirectiveStateChanged(const falcon::v1::DirectiveRecord& record, core::UnitOfWork* uow);
  absl::Status Commit(core::UnitOfWork* uow);
  // OK when the store is healthy or recovers now; kUnavailable otherwise.
  absl::Status EnsureStore();
  // Commits a unit whose caller cannot return the error (a message with no reply, the tick): a
  // failure is logged with `what` was lost and counted as falcon_controller_errors_total{where}.
  void CommitOrCount(core::UnitOfWork* uow, absl::string_view where, absl::string_view what);
  void Reply(AgentSession* session, const falcon::v1::ControllerMessage& message);
  // Closes the announced streams idle for stream_idle_timeout.
  void CloseIdleStreams(absl::Time now);
  // Retention (retention.cc): purges one batch of expired state when a sweep is due; once no
  // more is due, releases the memory the purged state held (flushes the store's write buffers and
  // returns the freed heap; the next sweep returns once more what the store freed late).
  void SweepRetention(absl::Time now);
  // Part of the sweep: drops one batch of audit records older than `cutoff`.
  void PurgeAudit(absl::Time cutoff);
  void ReleasePurgedMemory();
  // Counts and logs a refused registration.
  void CountRefusal(const LimitRefusal& refusal);

  const ControllerOptions options_;
  const common::Clock* const clock_;
  metrics::ControllerMetrics* const metrics_;
  common::NullErrorCounter no_errors_;
  common::ErrorCounter& errors_;  // *metrics_, or no_errors_ without metrics.
  detection::MitigationHook* const hook_;
  store::ControllerStore store_;
  core::IdAllocator ids_;
  core::AgentHub hub_;
  registry::JobRegistry registry_;
  settings::SettingsManager settings_;
  detection::EventManager events_;
  core::DirectiveIssuer directives_;
  core::AuditTrail audit_;
  detection::Localizer localizer_;
  detection::DetectionManager detection_;
  detection::ImbalanceTracker imbalance_;
  std::map<std::string, std::string> imbalance_logged_;  // Job -> kinds last logged.
  struct AgentState {
    ingest::SequenceTracker tracker;
    falcon::controller::v1::AgentRecord record;
  };
  absl::flat_hash_map<std::string, AgentState> agents_;
  absl::flat_hash_map<std::string, std::string> live_peers_;  // Connected agent -> its peer.
  registry::JobPresence presence_;               // Agents away from their jobs, for job_end_grace.
  absl::flat_hash_set<AgentSession*> sessions_;  // Announced streams not yet disconnected.
  absl::Time next_sweep_ = absl::InfinitePast();
  bool purged_unreleased_ = false;  // Purged since the last ReleasePurgedMemory.
  bool trim_again_ = false;         // Returns freed memory once more at the next sweep.
};

}  // namespace falcon::controller

#endif  // FALCON_CONTROLLER_CONTROLLER_H_
