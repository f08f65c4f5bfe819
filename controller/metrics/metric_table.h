// The controller's metrics, declared once: every name, type, unit, label set and help text the
// controller exports. ControllerMetrics registers its families from these specs, and the docs'
// metrics table (docs/metrics.md, printed by //tools/metrics_doc) is rendered from kAll; no
// other file spells a controller metric name in code. Every name starts with falcon_controller_.
// Label values: state and cause as EventStateLabel/CauseLabel (controller_metrics.h), strategy
// as the directive's kind word (common/directive_kind.h); job is the training job; where is one of
// kErrorSites (below).
#ifndef FALCON_CONTROLLER_METRICS_METRIC_TABLE_H_
#define FALCON_CONTROLLER_METRICS_METRIC_TABLE_H_

#include "common/metrics/metric_spec.h"

namespace falcon::controller::metrics {

using common::metrics::MetricSpec;
using common::metrics::MetricType;

inline constexpr char kPrefix[] = "falcon_controller_";

inline constexpr MetricSpec kBuildInfo{"falcon_controller_build_info", MetricType::kGauge, "1",
                                       "version", "Build information; the value is always 1"};
inline constexpr MetricSpec kAgentsConnected{"falcon_controller_agents_connected",
                                             MetricType::kGauge, "agents", "",
                                             "Agents with a live telemetry stream"};
inline constexpr MetricSpec kIngestBatches{"falcon_controller_ingest_batches_total",
                                           MetricType::kCounter, "batches", "",
                                           "Telemetry batches stored and applied"};
inline constexpr MetricSpec kIngestDuplicateBatches{
    "falcon_controller_ingest_duplicate_batches_total", MetricType::kCounter, "batches", "",
    "Telemetry batches received again (acknowledged, not re-applied)"};
inline constexpr MetricSpec kIngestRejectedBatches{
    "falcon_controller_ingest_rejected_batches_total", MetricType::kCounter, "batches", "",
    "Telemetry batches rejected with a field error"};
inline constexpr MetricSpec kIngestIterationSummaries{
    "falcon_controller_ingest_iteration_summaries_total", MetricType::kCounter, "summaries", "",
    "Per-rank iteration summaries ingested"};
inline constexpr MetricSpec kIngestOpRecords{"falcon_controller_ingest_op_records_total",
                                             MetricType::kCounter, "records", "",
                                             "Raw op records ingested (profiling)"};
inline constexpr MetricSpec kIngestStaleSummaries{
    "falcon_controller_ingest_stale_summaries_total", MetricType::kCounter, "summaries", "",
    "Summaries skipped because their iteration was not above the rank's last"};
inline constexpr MetricSpec kValidationResults{"falcon_controller_validation_results_total",
                                               MetricType::kCounter, "results", "",
                                               "Validation results received from agents"};
inline constexpr MetricSpec kDirectiveAcks{"falcon_controller_directive_acks_total",
                                           MetricType::kCounter, "acks", "",
                                           "Directive acknowledgements received from agents"};
inline constexpr MetricSpec kEvents{"falcon_controller_events", MetricType::kGauge, "events",
                                    "state,cause", "Fail-slow events by current state and cause"};
inline constexpr MetricSpec kEventTransitions{"falcon_controller_event_transitions_total",
                                              MetricType::kCounter, "transitions", "state,cause",
                                              "Event state transitions by new state and cause"};
inline constexpr MetricSpec kDetectionDelaySeconds{
    "falcon_controller_detection_delay_seconds", MetricType::kHistogram, "seconds", "",
    "Time from a fail-slow's onset to its confirmation"};
inline constexpr MetricSpec kDetectionDelayIterations{
    "falcon_controller_detection_delay_iterations", MetricType::kHistogram, "iterations", "",
    "Iterations from a fail-slow's onset to its confirmation"};
inline constexpr MetricSpec kActiveFailSlows{
    "falcon_controller_active_fail_slows", MetricType::kGauge, "events", "job",
    "Active (not recovered or closed) fail-slow events of the job"};
inline constexpr MetricSpec kEnvironmentShifts{
    "falcon_controller_environment_shifts_total", MetricType::kCounter, "shifts", "job",
    "Verified slowdowns of the job that every rank's compute explains (load from outside the "
    "job, docs/algorithms.md#environment-shifts): no event opened"};
inline constexpr MetricSpec kWorkloadImbalance{
    "falcon_controller_workload_imbalance", MetricType::kGauge, "ratio", "job,kind",
    "Workload imbalance of a job's recent iterations (kind stage: the heavy stage's compute over "
    "the others', 0 when balanced; kind jitter: median spread across a stage's ranks, 0 when "
    "none): uneven work, never a reason to mitigate"};
inline constexpr MetricSpec kJobIterationTime{"falcon_controller_job_iteration_time_seconds",
                                              MetricType::kGauge, "seconds", "job",
                                              "Latest job iteration time (max over ranks)"};
inline constexpr MetricSpec kJobIterations{
    "falcon_controller_job_iterations_total", MetricType::kCounter, "iterations", "job",
    "Job iterations ingested (one per job iteration, all ranks)"};
inline constexpr MetricSpec kDirectivesIssued{
    "falcon_controller_directives_issued_total", MetricType::kCounter, "directives", "strategy",
    "Directives committed, by strategy (s2 micro-batch plan, s2l layer split, s3 topology change, "
    "s4 checkpoint-restart) or validation and profiling kind (pause, resume, profiling)"};
inline constexpr MetricSpec kStoreWriteLatency{"falcon_controller_store_write_latency_seconds",
                                               MetricType::kHistogram, "seconds", "",
                                               "RocksDB write (one atomic batch) latency"};
inline constexpr MetricSpec kStoreWriteErrors{"falcon_controller_store_write_errors_total",
                                              MetricType::kCounter, "writes", "",
                                              "Failed RocksDB writes and log syncs"};
inline constexpr MetricSpec kStoreSyncLatency{
    "falcon_controller_store_sync_latency_seconds", MetricType::kHistogram, "seconds", "",
    "RocksDB log sync (fsync) latency; one sync makes a group of commits durable before their "
    "acknowledgements go out"};
inline constexpr MetricSpec kStoreRepairLost{
    "falcon_controller_store_repair_lost", MetricType::kGauge, "records", "kind",
    "What repairing a damaged store at this start (--store_repair) lost, by kind (jobs, events, "
    "directives, batches): the count recorded with the last durable commit minus the count "
    "after the repair; absent when nothing was repaired"};
inline constexpr MetricSpec kRetentionPurged{
    "falcon_controller_retention_purged_total", MetricType::kCounter, "items", "kind",
    "Ended jobs, events, directives and audit records purged from memory and store after the "
    "retention period, by kind (job, event, directive, audit)"};
inline constexpr MetricSpec kLimitRefusals{
    "falcon_controller_limit_refusals_total", MetricType::kCounter, "refusals", "limit",
    "Registrations and streams refused with RESOURCE_EXHAUSTED, by limit (max_ranks_per_job, "
    "max_jobs_per_agent, max_streams_per_peer)"};
inline constexpr MetricSpec kStreamIdleTimeouts{
    "falcon_controller_stream_idle_timeouts_total", MetricType::kCounter, "streams", "",
    "Agent streams closed because nothing (not even a heartbeat) arrived within the idle timeout"};
inline constexpr MetricSpec kPeerRefusals{
    "falcon_controller_peer_refusals_total", MetricType::kCounter, "refusals", "check",
    "Agent messages refused because the peer claimed what it does not own, by check "
    "(agent_id_live, first_unacked_sequence, epoch, validation_result_rank, directive_ack_rank, "
    "batch_rank, node_identity): a hello's stream ends with PERMISSION_DENIED, a batch's "
    "registration or data gets a field error, a result or ack is dropped"};
inline constexpr MetricSpec kErrors{"falcon_controller_errors_total", MetricType::kCounter,
                                    "errors", "where",
                                    "Errors handled by logging and going on, by site (where)"};

// Every controller metric, in the order of the docs' table.
inline constexpr MetricSpec kAll[] = {
    kBuildInfo,
    kAgentsConnected,
    kIngestBatches,
    kIngestDuplicateBatches,
    kIngestRejectedBatches,
    kIngestIterationSummaries,
    kIngestOpRecords,
    kIngestStaleSummaries,
    kValidationResults,
    kDirectiveAcks,
    kEvents,
    kEventTransitions,
    kDetectionDelaySeconds,
    kDetectionDelayIterations,
    kActiveFailSlows,
    kJobIterationTime,
    kEnvironmentShifts,
    kWorkloadImbalance,
    kJobIterations,
    kDirectivesIssued,
    kStoreWriteLatency,
    kStoreWriteErrors,
    kStoreSyncLatency,
    kStoreRepairLost,
    kRetentionPurged,
    kLimitRefusals,
    kStreamIdleTimeouts,
    kPeerRefusals,
    kErrors,
};

// The checks of falcon_controller_peer_refusals_total{check} (docs/operations.md#peer-checks);
// each series exists from the start at 0.
namespace check {
inline constexpr char kAgentIdLive[] = "agent_id_live";
inline constexpr char kFirstUnackedSequence[] = "first_unacked_sequence";
inline constexpr char kEpoch[] = "epoch";
inline constexpr char kValidationResultRank[] = "validation_result_rank";
inline constexpr char kDirectiveAckRank[] = "directive_ack_rank";
inline constexpr char kBatchRank[] = "batch_rank";
inline constexpr char kNodeIdentity[] = "node_identity";
}  // namespace check

inline constexpr const char* kPeerChecks[] = {
    check::kAgentIdLive,          check::kFirstUnackedSequence, check::kEpoch,
    check::kValidationResultRank, check::kDirectiveAckRank,     check::kBatchRank,
    check::kNodeIdentity,
};

// The sites of falcon_controller_errors_total{where}: every handled error the controller logs
// (LOG(WARNING), or LOG(ERROR) for a store write or sync) is counted at one of these, and each
// series exists from the start at 0. Code passes the constants; the list below describes each.
namespace where {
inline constexpr char kStoreWrite[] = "store_write";
inline constexpr char kStoreSync[] = "store_sync";
inline constexpr char kStoreRepair[] = "store_repair";
inline constexpr char kStoreDamagedRow[] = "store_damaged_row";
inline constexpr char kHelloStoreUnavailable[] = "hello_store_unavailable";
inline constexpr char kHelloCommit[] = "hello_commit";
inline constexpr char kBatchStoreUnavailable[] = "batch_store_unavailable";
inline constexpr char kBatchCommit[] = "batch_commit";
inline constexpr char kValidationResultStoreUnavailable[] = "validation_result_store_unavailable";
inline constexpr char kDirectiveAckStoreUnavailable[] = "directive_ack_store_unavailable";
inline constexpr char kBatchRejected[] = "batch_rejected";
inline constexpr char kValidationResultRefused[] = "validation_result_refused";
inline constexpr char kValidationResultCommit[] = "validation_result_commit";
inline constexpr char kDirectiveAckRefused[] = "directive_ack_refused";
inline constexpr char kDirectiveAckCommit[] = "directive_ack_commit";
inline constexpr char kDirectiveRejected[] = "directive_rejected";
inline constexpr char kDirectiveTimedOut[] = "directive_timed_out";
inline constexpr char kTickCommit[] = "tick_commit";
inline constexpr char kDetectionSetThresholds[] = "detection_set_thresholds";
inline constexpr char kDetectionEnvironment[] = "detection_environment";
inline constexpr char kDetectionObservation[] = "detection_observation";
inline constexpr char kValidationPauseTimeout[] = "validation_pause_timeout";
inline constexpr char kValidationTaskTimeout[] = "validation_task_timeout";
inline constexpr char kMitigationStart[] = "mitigation_start";
inline constexpr char kMitigationEscalationStart[] = "mitigation_escalation_start";
inline constexpr char kMitigationEscalationIteration[] = "mitigation_escalation_iteration";
inline constexpr char kMitigationEscalationSettings[] = "mitigation_escalation_settings";
inline constexpr char kMitigationEscalationSkip[] = "mitigation_escalation_skip";
inline constexpr char kMitigationEscalationCleared[] = "mitigation_escalation_cleared";
inline constexpr char kMitigationRecordAction[] = "mitigation_record_action";
inline constexpr char kMitigationMarkMitigating[] = "mitigation_mark_mitigating";
inline constexpr char kMitigationSetMitigatedTime[] = "mitigation_set_mitigated_time";
inline constexpr char kMitigationSetJobPlan[] = "mitigation_set_job_plan";
inline constexpr char kMitigationRecoverEvent[] = "mitigation_recover_event";
inline constexpr char kMitigationRevertJobUnknown[] = "mitigation_revert_job_unknown";
inline constexpr char kMitigationRevertDirective[] = "mitigation_revert_directive";
inline constexpr char kMitigationCloseEvent[] = "mitigation_close_event";
inline constexpr char kMitigationS4Issue[] = "mitigation_s4_issue";
inline constexpr char kMitigationSetCeiling[] = "mitigation_set_ceiling";
inline constexpr char kMitigationS2LPause[] = "mitigation_s2l_pause";
inline constexpr char kRetentionCommit[] = "retention_commit";
inline constexpr char kRetentionFlush[] = "retention_flush";
inline constexpr char kAuditCommit[] = "audit_commit";
}  // namespace where

inline constexpr common::metrics::ErrorSite kErrorSites[] = {
    {where::kStoreWrite,
     "The store failed a write (also in store_write_errors_total): the unit's messages are "
     "dropped, its changes stay in memory and its writes are kept until the store recovers; "
     "counted once per failure"},
    {where::kStoreSync,
     "The store failed to sync its log: nothing is acknowledged until it recovers; counted once "
     "per failure"},
    {where::kStoreRepair,
     "The store was damaged and repaired at start (--store_repair): what was lost is logged and "
     "in store_repair_lost"},
    {where::kStoreDamagedRow,
     "A stored sample row that does not parse, dropped at start with --store_repair (logged with "
     "its table, key and what is wrong; without the flag the controller refuses to start)"},
    {where::kHelloStoreUnavailable,
     "An agent's hello came while the store is failing: the stream is refused, the agent "
     "reconnects"},
    {where::kHelloCommit, "An agent's hello could not be stored: the stream is refused"},
    {where::kBatchStoreUnavailable,
     "A telemetry batch came while the store is failing: not applied nor acknowledged, the agent "
     "resends it"},
    {where::kBatchCommit,
     "A telemetry batch (or its rejection) could not be stored: not acknowledged, the agent "
     "resends it"},
    {where::kValidationResultStoreUnavailable,
     "A validation result came while the store is failing: dropped, its task times out"},
    {where::kDirectiveAckStoreUnavailable,
     "A directive ack came while the store is failing: dropped, the directive is re-delivered"},
    {where::kBatchRejected,
     "A telemetry batch or registration failed validation: the agent got a field error (also in "
     "ingest_rejected_batches_total)"},
    {where::kValidationResultRefused, "A malformed validation result was dropped"},
    {where::kValidationResultCommit,
     "A validation result could not be stored: it is lost and its task times out"},
    {where::kDirectiveAckRefused,
     "A directive ack was malformed, for an unknown directive or from a wrong epoch: ignored"},
    {where::kDirectiveAckCommit,
     "A directive ack could not be stored: the directive stays pending and is re-delivered"},
    {where::kDirectiveRejected,
     "A rank rejected a directive (or acked it from an older epoch): REJECTED, rolled back on the "
     "ranks that applied it"},
    {where::kDirectiveTimedOut,
     "A directive was not applied by every target within --directive_ack_timeout: TIMED_OUT"},
    {where::kTickCommit,
     "The periodic tick's changes (timeouts, job ends) could not be stored: decided again at the "
     "next tick"},
    {where::kDetectionSetThresholds,
     "A job's detectors refused its settings' thresholds: the previous ones stay"},
    {where::kDetectionEnvironment,
     "A slowdown could not be judged against the ranks' compute: it opens its event as if no "
     "compute were known"},
    {where::kDetectionObservation,
     "A series' detector refused an iteration time (not after its previous iteration, or out of "
     "range): that observation is skipped"},
    {where::kValidationPauseTimeout,
     "Not every rank confirmed the validation pause in time: validation ran anyway"},
    {where::kValidationTaskTimeout,
     "A validation task was not answered by every rank in time: the verdict goes on without it"},
    {where::kMitigationStart,
     "Mitigation of a localized event could not start (no healthy iteration time, settings out of "
     "range): logged once per event and error"},
    {where::kMitigationEscalationStart,
     "The escalation policy refused to start an event: no mitigation for it"},
    {where::kMitigationEscalationIteration,
     "The escalation policy refused an iteration's time: the iteration is not counted"},
    {where::kMitigationEscalationSettings,
     "The escalation policy refused new settings: the previous ones stay"},
    {where::kMitigationEscalationSkip,
     "The escalation policy refused to skip a level: the ladder stays where it is"},
    {where::kMitigationEscalationCleared,
     "The escalation policy refused a recovery: plans in force are not reverted by it"},
    {where::kMitigationRecordAction,
     "An action could not be added to the event's log (the event had ended): the action is lost"},
    {where::kMitigationMarkMitigating,
     "The event could not be marked MITIGATING after its plan was issued"},
    {where::kMitigationSetMitigatedTime,
     "The iteration time measured under a plan could not be recorded on the event"},
    {where::kMitigationSetJobPlan,
     "The plan in force could not be recorded on the job after its directive applied"},
    {where::kMitigationRecoverEvent,
     "An event the compute probe saw clear could not be recovered: its plans stay in force"},
    {where::kMitigationRevertJobUnknown, "A plan could not be reverted: its job is gone"},
    {where::kMitigationRevertDirective,
     "A revert directive could not be issued: the plan stays in force until the next revert step"},
    {where::kMitigationCloseEvent, "An event could not be closed after S4 restarted its job"},
    {where::kMitigationS4Issue, "The S4 directive could not be issued: recorded as an S1 action"},
    {where::kMitigationSetCeiling,
     "The recoverable ceiling of the plan in force could not be recorded on the event"},
    {where::kMitigationS2LPause,
     "An APPLIED ack of a layer split carried a malformed pause_s, move_s or bytes_moved: that "
     "rank's figures are not counted in S2L's measured cost"},
    {where::kRetentionCommit,
     "A batch of the retention purge could not be stored: nothing of it is forgotten, the next "
     "sweep tries again"},
    {where::kRetentionFlush,
     "The store's write buffers could not be flushed after a purge: their memory stays held "
     "until RocksDB flushes them itself"},
    {where::kAuditCommit,
     "An audit record of a Control call could not be stored: it is kept and written when the "
     "store recovers; the call's reply is unchanged"},
};

}  // namespace falcon::controller::metrics

#endif  // FALCON_CONTROLLER_METRICS_METRIC_TABLE_H_
