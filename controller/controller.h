// The controller's core: the composition root of the managers (registry, settings, detection,
// events, localization, directives) and the logic of the agent stream (telemetry.proto) and the
// periodic tick. The gRPC adapters (service/) only translate to and from these calls, and run
// them on the controller loop (service/event_loop.h): nothing here is thread-safe.
//
// Agent stream, per telemetry.proto: AgentHello first -> ControllerHello{acked_sequence =
// highest contiguous stored sequence of that agent}; every TelemetryBatch is validated, stored
// with its dedup mark in one atomic write and then acknowledged (BatchAck{sequence}); a duplicate
// (agent_id, sequence) is acknowledged and not applied; a malformed batch is acknowledged with a
// FieldError naming the field and not applied, and the stream stays open.
#ifndef FALCON_CONTROLLER_CONTROLLER_H_
#define FALCON_CONTROLLER_CONTROLLER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/error_counter.h"
#include "controller/core/agent_hub.h"
#include "controller/core/directive_issuer.h"
#include "controller/core/id_allocator.h"
#include "controller/core/unit_of_work.h"
#include "controller/detection/detection_manager.h"
#include "controller/detection/event_manager.h"
#include "controller/detection/localizer.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/ingest/sequence_tracker.h"
#include "controller/ingest/telemetry_validator.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/registry/job_registry.h"
#include "controller/settings/settings_manager.h"
#include "controller/store/controller_store.h"
#include "controller/store/kv_store.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller {

struct ControllerOptions {
  std::string controller_id = "falcon-controller";  // ControllerHello.controller_id.
  IngestLimits limits;
  DetectionOptions detection;
  LocalizationOptions localization;
  DirectiveOptions directives;
  // A job none of whose agents is connected for this long ends (its active event closes).
  absl::Duration job_end_grace = absl::Seconds(120);

  absl::Status Validate() const;
};

// One agent stream as the controller sees it. Owned by the stream adapter.
struct AgentSession {
  std::shared_ptr<AgentChannel> channel;  // Where replies go.
  std::string agent_id;                   // Set by the hello.
  std::string node;
  uint64_t hub_session = 0;
  bool hello_done = false;
};

class Controller {
 public:
  // Loads every table and resumes open events. `kv`, `clock` and `metrics` must outlive the
  // controller; `hook` (may be null: verdicts end at LOCALIZED, i.e. S1) too.
  // Errors: kInvalidArgument for bad options; store errors (kDataLoss on a corrupt record).
  static absl::StatusOr<std::unique_ptr<Controller>> Create(const ControllerOptions& options,
                                                            KvStore* kv, const common::Clock* clock,
                                                            ControllerMetrics* metrics,
                                                            MitigationHook* hook = nullptr);
  ~Controller();

  // One message of an agent stream. OK: keep reading. An error ends the stream with it:
  // kInvalidArgument / kFailedPrecondition for a protocol violation (a hello that is malformed or
  // comes twice, data before the hello), kUnavailable when the store failed (the agent resends).
  absl::Status OnAgentMessage(AgentSession* session, const falcon::v1::AgentMessage& message);
  // The stream ended.
  void OnAgentDisconnected(AgentSession* session);
  // Timeouts (localization phases, directive acks, job end); call about once a second.
  void Tick();

  // Managers, for the Control API and tests.
  const JobRegistry& registry() const { return registry_; }
  const SettingsManager& settings() const { return settings_; }
  EventManager& events() { return events_; }
  const EventManager& events() const { return events_; }
  const DetectionManager& detection() const { return detection_; }
  const DirectiveIssuer& directives() const { return directives_; }
  const AgentHub& hub() const { return hub_; }
  const ControllerStore& store() const { return store_; }
  const common::Clock& clock() const { return *clock_; }

  // The Job the Control API serves: the registration plus the live figures.
  falcon::v1::Job JobView(const JobEntry& job) const;
  // Control API writes. Errors: kInvalidArgument naming the field; kFailedPrecondition;
  // kUnavailable when the store failed.
  absl::StatusOr<falcon::v1::Settings> SetSettings(const falcon::v1::Settings& update);
  absl::StatusOr<uint64_t> ForceValidation(const std::string& job);
  // The mitigation hook's dry run of the job's active event (MitigationHook::DryRun); acts on
  // nothing. kNotFound without an active event or hook state; kUnimplemented without a hook.
  absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRunActive(const std::string& job);

 private:
  class Actions;  // EventActions bound to one unit of work.

  Controller(const ControllerOptions& options, KvStore* kv, const common::Clock* clock,
             ControllerMetrics* metrics, MitigationHook* hook,
             falcon::controller::v1::MetaRecord meta);
  absl::Status Load();
  absl::Status OnHello(AgentSession* session, const falcon::v1::AgentHello& hello);
  absl::Status OnBatch(AgentSession* session, const falcon::v1::TelemetryBatch& batch);
  absl::Status Reject(AgentSession* session, uint64_t sequence, falcon::v1::FieldError error);
  void OnValidationResult(const falcon::v1::ValidationResult& result);
  void OnDirectiveAck(const falcon::v1::DirectiveAck& ack);
  void EndJob(JobEntry* job, const std::string& reason, UnitOfWork* uow);
  void PersistAgent(const std::string& agent_id, UnitOfWork* uow);
  void DirectiveStateChanged(const falcon::v1::DirectiveRecord& record, UnitOfWork* uow);
  absl::Status Commit(UnitOfWork* uow);
  // Commits a unit whose caller cannot return the error (a message with no reply, the tick): a
  // failure is logged with `what` was lost and counted as falcon_controller_errors_total{where}.
  void CommitOrCount(UnitOfWork* uow, absl::string_view where, absl::string_view what);
  static void Reply(AgentSession* session, const falcon::v1::ControllerMessage& message);

  const ControllerOptions options_;
  const common::Clock* const clock_;
  ControllerMetrics* const metrics_;
  common::NullErrorCounter no_errors_;
  common::ErrorCounter& errors_;  // *metrics_, or no_errors_ without metrics.
  MitigationHook* const hook_;
  ControllerStore store_;
  IdAllocator ids_;
  AgentHub hub_;
  JobRegistry registry_;
  SettingsManager settings_;
  EventManager events_;
  DirectiveIssuer directives_;
  Localizer localizer_;
  DetectionManager detection_;
  struct AgentState {
    SequenceTracker tracker;
    falcon::controller::v1::AgentRecord record;
  };
  absl::flat_hash_map<std::string, AgentState> agents_;
  absl::flat_hash_map<std::string, absl::Time> orphaned_since_;  // job -> no agent connected
};

}  // namespace falcon::controller

#endif  // FALCON_CONTROLLER_CONTROLLER_H_
