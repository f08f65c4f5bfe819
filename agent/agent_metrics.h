// The agent's Prometheus metrics (docs/architecture.md#metric-conventions: base units, counters
// end in _total, labels job/rank/node/...; no per-op or per-iteration labels). Every series carries
// the constant label node. Series:
//   falcon_agent_build_info{version}                                 gauge, 1
//   falcon_agent_iteration_time_seconds{job,rank,gpu}                gauge, latest iteration
//   falcon_agent_compute_time_seconds{job,rank,gpu}                  gauge, latest iteration's time
//       outside communication ops (IterationSummary.compute_ns)
//   falcon_agent_iterations_total{job,rank,gpu}                      counter, summaries made
//   falcon_agent_op_duration_seconds{job,comm_kind}                  histogram, host op time
//   falcon_agent_records_in_total{job,rank,gpu}                      counter, op records from shims
//   falcon_agent_records_out_total{job,type=summary|op}              counter, records to controller
//   falcon_agent_records_dropped_total{job,reason}                   counter; reason: shim_ring
//       (reported by the shim), unassigned (in no iteration), overflow (agent memory bound),
//       profiling (raw-op bound)
//   falcon_agent_buffer_batches / _buffer_bytes / _buffer_occupancy_ratio   gauges
//   falcon_agent_buffer_dropped_batches_total / _buffer_dropped_records_total counters
//   falcon_agent_batches_sent_total / _resent_total / _acked_total / _rejected_total counters
//   falcon_agent_controller_connected                                 gauge, 0/1
//   falcon_agent_controller_connects_total                            counter
//   falcon_agent_shim_sessions                                        gauge, live sessions
//   falcon_agent_shim_errors_total                                    counter, malformed messages
//   falcon_agent_directives_relayed_total / _validation_tasks_relayed_total counters
// gpu is the rank's CUDA device index (DCGM's label, for joins), "cpu" for CPU ranks.
// Thread-safe (prometheus-cpp metrics are).
#ifndef FALCON_AGENT_AGENT_METRICS_H_
#define FALCON_AGENT_AGENT_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/telemetry_buffer.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::agent {

class AgentMetrics {
 public:
  // Series of one rank; removed with RemoveRank.
  struct RankSeries {
    prometheus::Gauge* iteration_time_seconds = nullptr;
    prometheus::Gauge* compute_time_seconds = nullptr;
    prometheus::Counter* iterations = nullptr;
    prometheus::Counter* records_in = nullptr;
  };
  // Series of one job; removed with RemoveJob.
  struct JobSeries {
    std::array<prometheus::Histogram*, 6> op_duration{};  // Indexed by v1::CommKind (0..5).
    prometheus::Counter* summaries_out = nullptr;
    prometheus::Counter* ops_out = nullptr;
    prometheus::Counter* dropped_shim_ring = nullptr;
    prometheus::Counter* dropped_unassigned = nullptr;
    prometheus::Counter* dropped_overflow = nullptr;
    prometheus::Counter* dropped_profiling = nullptr;
  };

  AgentMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& node,
               const std::string& version);

  // `gpu`: the rank's device index, -1 for CPU.
  RankSeries AddRank(const std::string& job, uint32_t rank, int32_t gpu);
  void RemoveRank(const RankSeries& series);
  JobSeries AddJob(const std::string& job);
  void RemoveJob(const JobSeries& series);

  // Label value of a communicator kind: dp, pp, tp, world, unknown.
  static const char* CommKindLabel(v1::CommKind kind);

  // Copies the buffer's cumulative stats into gauges and counters.
  void UpdateBuffer(const TelemetryBuffer::Stats& stats, const TelemetryBuffer::Options& options)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SetControllerConnected(bool connected);
  void CountConnect() { connects_->Increment(); }
  void CountRejectedBatch() { rejected_->Increment(); }
  void SetShimSessions(size_t n) { shim_sessions_->Set(static_cast<double>(n)); }
  void CountShimError() { shim_errors_->Increment(); }
  void CountDirectiveRelayed() { directives_->Increment(); }
  void CountValidationTaskRelayed() { tasks_->Increment(); }

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& iteration_time_;
  prometheus::Family<prometheus::Gauge>& compute_time_;
  prometheus::Family<prometheus::Counter>& iterations_;
  prometheus::Family<prometheus::Histogram>& op_duration_;
  prometheus::Family<prometheus::Counter>& records_in_;
  prometheus::Family<prometheus::Counter>& records_out_;
  prometheus::Family<prometheus::Counter>& records_dropped_;
  prometheus::Gauge* buffer_batches_;
  prometheus::Gauge* buffer_bytes_;
  prometheus::Gauge* buffer_occupancy_;
  prometheus::Counter* buffer_dropped_batches_;
  prometheus::Counter* buffer_dropped_records_;
  prometheus::Counter* sent_;
  prometheus::Counter* resent_;
  prometheus::Counter* acked_;
  prometheus::Counter* rejected_;
  prometheus::Gauge* connected_;
  prometheus::Counter* connects_;
  prometheus::Gauge* shim_sessions_;
  prometheus::Counter* shim_errors_;
  prometheus::Counter* directives_;
  prometheus::Counter* tasks_;

  absl::Mutex mu_;
  TelemetryBuffer::Stats last_buffer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_AGENT_METRICS_H_
