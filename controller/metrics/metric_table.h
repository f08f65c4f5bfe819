// The controller's metrics, declared once: every name, type, unit, label set and help text the
// controller exports. ControllerMetrics registers its families from these specs, and the docs'
// metrics table (docs/metrics.md, printed by //tools/metrics_doc) is rendered from kAll; no
// other file spells a controller metric name in code. Every name starts with falcon_controller_.
// Label values: state and cause as EventStateLabel/CauseLabel, strategy as StrategyLabel
// (controller_metrics.h); job is the training job; where is a site name (common/error_counter.h).
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
    "Active (not recovered or closed) fail-slow events of the job, 0 or 1"};
inline constexpr MetricSpec kJobIterationTime{"falcon_controller_job_iteration_time_seconds",
                                              MetricType::kGauge, "seconds", "job",
                                              "Latest job iteration time (max over ranks)"};
inline constexpr MetricSpec kJobIterations{
    "falcon_controller_job_iterations_total", MetricType::kCounter, "iterations", "job",
    "Job iterations ingested (one per job iteration, all ranks)"};
inline constexpr MetricSpec kDirectivesIssued{
    "falcon_controller_directives_issued_total", MetricType::kCounter, "directives", "strategy",
    "Directives committed, by strategy (s2 micro-batch plan, s3 topology change, s4 "
    "checkpoint-restart) or validation and profiling kind (pause, resume, profiling)"};
inline constexpr MetricSpec kStoreWriteLatency{"falcon_controller_store_write_latency_seconds",
                                               MetricType::kHistogram, "seconds", "",
                                               "RocksDB write (one atomic batch) latency"};
inline constexpr MetricSpec kStoreWriteErrors{"falcon_controller_store_write_errors_total",
                                              MetricType::kCounter, "writes", "",
                                              "Failed RocksDB writes"};
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
    kJobIterations,
    kDirectivesIssued,
    kStoreWriteLatency,
    kStoreWriteErrors,
    kErrors,
};

}  // namespace falcon::controller::metrics

#endif  // FALCON_CONTROLLER_METRICS_METRIC_TABLE_H_
