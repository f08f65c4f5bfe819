// The agent's metrics, declared once: every name, type, unit, label set and help text the agent
// exports. AgentMetrics registers its families from these specs, and the docs' metrics table
// (docs/metrics.md, printed by //tools/metrics_doc) is rendered from kAll; no other file spells an
// agent metric name in code. Every name starts with falcon_agent_; every series carries the
// constant label node. gpu is the rank's CUDA device index (DCGM's label, for joins), "cpu" for
// CPU ranks; comm_kind is dp, pp, tp, world or unknown.
#ifndef FALCON_AGENT_AGENT_METRICS_TABLE_H_
#define FALCON_AGENT_AGENT_METRICS_TABLE_H_

#include "common/metrics/metric_spec.h"

namespace falcon::agent::metric {

using common::metrics::MetricSpec;
using common::metrics::MetricType;

inline constexpr char kPrefix[] = "falcon_agent_";

inline constexpr MetricSpec kBuildInfo{"falcon_agent_build_info", MetricType::kGauge, "1",
                                       "node,version", "Agent build; the value is always 1"};
inline constexpr MetricSpec kIterationTime{"falcon_agent_iteration_time_seconds",
                                           MetricType::kGauge, "seconds", "node,job,rank,gpu",
                                           "Latest iteration time of a rank"};
inline constexpr MetricSpec kComputeTime{
    "falcon_agent_compute_time_seconds", MetricType::kGauge, "seconds", "node,job,rank,gpu",
    "Latest iteration's compute time of a rank (outside communication ops)"};
inline constexpr MetricSpec kIterations{"falcon_agent_iterations_total", MetricType::kCounter,
                                        "iterations", "node,job,rank,gpu",
                                        "Iteration summaries made for a rank"};
inline constexpr MetricSpec kOpDuration{
    "falcon_agent_op_duration_seconds", MetricType::kHistogram, "seconds", "node,job,comm_kind",
    "Host duration of collective and p2p ops, per communicator kind"};
inline constexpr MetricSpec kRecordsIn{"falcon_agent_records_in_total", MetricType::kCounter,
                                       "records", "node,job,rank,gpu",
                                       "Op records received from shims"};
inline constexpr MetricSpec kRecordsOut{
    "falcon_agent_records_out_total", MetricType::kCounter, "records", "node,job,type",
    "Records handed to the controller stream; type: summary (iteration summaries), op (raw ops)"};
inline constexpr MetricSpec kRecordsDropped{
    "falcon_agent_records_dropped_total", MetricType::kCounter, "records", "node,job,reason",
    "Op records dropped before reduction; reason: shim_ring (reported by the shim), unassigned "
    "(in no iteration), overflow (agent memory bound), profiling (raw-op bound)"};
inline constexpr MetricSpec kBufferBatches{"falcon_agent_buffer_batches", MetricType::kGauge,
                                           "batches", "node",
                                           "Telemetry batches held for the controller"};
inline constexpr MetricSpec kBufferBytes{"falcon_agent_buffer_bytes", MetricType::kGauge, "bytes",
                                         "node", "Serialized bytes held for the controller"};
inline constexpr MetricSpec kBufferOccupancy{"falcon_agent_buffer_occupancy_ratio",
                                             MetricType::kGauge, "ratio", "node",
                                             "Buffer fill, the larger of batches and bytes"};
inline constexpr MetricSpec kBufferDroppedBatches{
    "falcon_agent_buffer_dropped_batches_total", MetricType::kCounter, "batches", "node",
    "Telemetry batches dropped because the buffer was full"};
inline constexpr MetricSpec kBufferDroppedRecords{"falcon_agent_buffer_dropped_records_total",
                                                  MetricType::kCounter, "records", "node",
                                                  "Summaries and raw ops inside dropped batches"};
inline constexpr MetricSpec kBatchesSent{"falcon_agent_batches_sent_total", MetricType::kCounter,
                                         "batches", "node",
                                         "Telemetry batches sent the first time"};
inline constexpr MetricSpec kBatchesResent{"falcon_agent_batches_resent_total",
                                           MetricType::kCounter, "batches", "node",
                                           "Telemetry batches sent again"};
inline constexpr MetricSpec kBatchesAcked{"falcon_agent_batches_acked_total", MetricType::kCounter,
                                          "batches", "node",
                                          "Telemetry batches the controller stored"};
inline constexpr MetricSpec kBatchesRejected{"falcon_agent_batches_rejected_total",
                                             MetricType::kCounter, "batches", "node",
                                             "Telemetry batches the controller rejected"};
inline constexpr MetricSpec kControllerConnected{"falcon_agent_controller_connected",
                                                 MetricType::kGauge, "1", "node",
                                                 "1 while the controller stream is up"};
inline constexpr MetricSpec kControllerConnects{"falcon_agent_controller_connects_total",
                                                MetricType::kCounter, "streams", "node",
                                                "Controller streams established"};
inline constexpr MetricSpec kShimSessions{"falcon_agent_shim_sessions", MetricType::kGauge,
                                          "sessions", "node", "Live shim sessions"};
inline constexpr MetricSpec kShimErrors{"falcon_agent_shim_errors_total", MetricType::kCounter,
                                        "messages", "node", "Malformed shim messages answered"};
inline constexpr MetricSpec kDirectivesRelayed{"falcon_agent_directives_relayed_total",
                                               MetricType::kCounter, "directives", "node",
                                               "Directives relayed to shims"};
inline constexpr MetricSpec kValidationTasksRelayed{"falcon_agent_validation_tasks_relayed_total",
                                                    MetricType::kCounter, "tasks", "node",
                                                    "Validation tasks relayed to shims"};
inline constexpr MetricSpec kErrors{"falcon_agent_errors_total", MetricType::kCounter, "errors",
                                    "node,where",
                                    "Errors handled by logging and going on, by site (where)"};

// Every agent metric, in the order of the docs' table.
inline constexpr MetricSpec kAll[] = {
    kBuildInfo,
    kIterationTime,
    kComputeTime,
    kIterations,
    kOpDuration,
    kRecordsIn,
    kRecordsOut,
    kRecordsDropped,
    kBufferBatches,
    kBufferBytes,
    kBufferOccupancy,
    kBufferDroppedBatches,
    kBufferDroppedRecords,
    kBatchesSent,
    kBatchesResent,
    kBatchesAcked,
    kBatchesRejected,
    kControllerConnected,
    kControllerConnects,
    kShimSessions,
    kShimErrors,
    kDirectivesRelayed,
    kValidationTasksRelayed,
    kErrors,
};

// The sites of falcon_agent_errors_total{where}: every handled error the agent logs
// (LOG(WARNING)) is counted at one of these, and each series exists from the start at 0. Code
// passes the constants; the list below describes each.
namespace where {
inline constexpr char kControllerStream[] = "controller_stream";
inline constexpr char kControllerBatchRejected[] = "controller_batch_rejected";
inline constexpr char kShimMessageRefused[] = "shim_message_refused";
inline constexpr char kDirectiveIgnored[] = "directive_ignored";
inline constexpr char kValidationTaskUndelivered[] = "validation_task_undelivered";
inline constexpr char kShimPeerRefused[] = "shim_peer_refused";
inline constexpr char kShimJobOwnerRefused[] = "shim_job_owner_refused";
}  // namespace where

inline constexpr common::metrics::ErrorSite kErrorSites[] = {
    {where::kControllerStream,
     "The controller stream ended or could not be opened: telemetry is held, the agent "
     "reconnects with backoff"},
    {where::kControllerBatchRejected,
     "The controller rejected a telemetry batch with a field error (also in "
     "batches_rejected_total): the batch is dropped"},
    {where::kShimMessageRefused,
     "A shim sent a malformed message: answered with an error (also in shim_errors_total)"},
    {where::kDirectiveIgnored,
     "A directive named a job or ranks that run on no shim of this node: ignored"},
    {where::kValidationTaskUndelivered,
     "A validation task's rank has no live shim session: answered with an error result"},
    {where::kShimPeerRefused,
     "A process whose uid and gid the shim socket does not allow connected: closed at once "
     "(socket_uids, socket_gids, socket_group)"},
    {where::kShimJobOwnerRefused,
     "A shim attached to a job whose ranks a shim of another uid holds here: its stream is ended "
     "with PERMISSION_DENIED"},
};

}  // namespace falcon::agent::metric

#endif  // FALCON_AGENT_AGENT_METRICS_TABLE_H_
