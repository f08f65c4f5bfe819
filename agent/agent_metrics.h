// The agent's Prometheus metrics. Every name, type, unit, label set and help text is declared
// once in agent_metrics_table.h (and listed in docs/metrics.md, generated from it); every series
// carries the constant label node. Errors the agent handles by logging and going on are counted
// as falcon_agent_errors_total{where} (common/error_counter.h).
// Thread-safe (prometheus-cpp metrics are).
#ifndef FALCON_AGENT_AGENT_METRICS_H_
#define FALCON_AGENT_AGENT_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/telemetry_buffer.h"
#include "common/error_counter.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::agent {

class AgentMetrics : public common::ErrorCounter {
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

  // An error handled by logging it and going on: falcon_agent_errors_total{where}.
  void CountError(absl::string_view where) override;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  const prometheus::Labels node_label_;
  prometheus::Family<prometheus::Gauge>& iteration_time_;
  prometheus::Family<prometheus::Gauge>& compute_time_;
  prometheus::Family<prometheus::Counter>& iterations_;
  prometheus::Family<prometheus::Histogram>& op_duration_;
  prometheus::Family<prometheus::Counter>& records_in_;
  prometheus::Family<prometheus::Counter>& records_out_;
  prometheus::Family<prometheus::Counter>& records_dropped_;
  prometheus::Family<prometheus::Counter>& errors_;
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
