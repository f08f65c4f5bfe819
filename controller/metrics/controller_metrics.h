// The controller's Prometheus metrics. Every name, type, unit, label set and help text is
// declared once in metric_table.h (and listed in docs/metrics.md, generated from it); families are
// built from that table once in the constructor on a caller-owned Registry; per-job series are
// removed when a job ends. Thread-safe (prometheus-cpp metrics are; the per-job map is guarded).
#ifndef FALCON_CONTROLLER_METRICS_CONTROLLER_METRICS_H_
#define FALCON_CONTROLLER_METRICS_CONTROLLER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/error_counter.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::metrics {

// "suspected", "confirmed", ...; "compute", "communication", "unknown", "none" (not yet known).
std::string EventStateLabel(falcon::v1::EventState state);
std::string CauseLabel(falcon::v1::Cause cause);

class ControllerMetrics : public common::ErrorCounter {
 public:
  ControllerMetrics(prometheus::Registry& registry, const std::string& version);

  void AgentsConnected(size_t n) { agents_connected_.Set(static_cast<double>(n)); }
  void BatchApplied() { batches_.Increment(); }
  void BatchDuplicate() { duplicates_.Increment(); }
  void BatchRejected() { rejected_.Increment(); }
  void Summaries(uint64_t n) { summaries_.Increment(static_cast<double>(n)); }
  void OpRecords(uint64_t n) { ops_.Increment(static_cast<double>(n)); }
  void StaleSummaries(uint64_t n) { stale_.Increment(static_cast<double>(n)); }
  void ValidationResult() { validation_results_.Increment(); }
  void DirectiveAck() { directive_acks_.Increment(); }

  // An event entered `state` with `cause`; `previous` is its former (state, cause) or UNSPECIFIED
  // for a new event. Moves it between the per-(state, cause) series of metric::kEvents and counts
  // the transition.
  void EventTransition(falcon::v1::EventState previous_state, falcon::v1::Cause previous_cause,
                       falcon::v1::EventState state, falcon::v1::Cause cause);
  // An event in `state` with `cause` was purged (retention): it leaves metric::kEvents.
  void EventForgotten(falcon::v1::EventState state, falcon::v1::Cause cause);
  void DetectionDelay(absl::Duration delay, int64_t iterations);
  void ActiveFailSlows(const std::string& job, int active);
  // Sets the job's latest iteration time and counts one ingested job iteration.
  void JobIterationTime(const std::string& job, absl::Duration time);
  // A verified slowdown of `job` judged an environment shift (no event opened).
  void EnvironmentShift(const std::string& job);
  // falcon_controller_workload_imbalance{job, kind="stage"|"jitter"}.
  void WorkloadImbalance(const std::string& job, double stage_ratio, double jitter_spread);
  // A directive was committed (counted by its kind word, common::DirectiveKindName).
  void DirectiveIssued(const falcon::v1::Directive& directive);
  // Drops the job's series.
  void RemoveJob(const std::string& job);
  void StoreWrite(absl::Duration latency, bool ok);
  void StoreSync(absl::Duration latency, bool ok);
  // A repair of the damaged store lost `lost` records of `kind` (jobs, events, ...).
  void StoreRepairLost(const std::string& kind, int64_t lost);
  // Items purged by retention; `kind` is "job", "event" or "directive".
  void RetentionPurged(absl::string_view kind, uint64_t n);
  // A registration or stream refused with RESOURCE_EXHAUSTED; `limit` names the flag
  // ("max_ranks_per_job", "max_jobs_per_agent", "max_streams_per_peer").
  void LimitRefused(absl::string_view limit);
  // An agent message refused by a peer check (metrics::check).
  void PeerRefused(absl::string_view check);
  // An agent stream closed by the idle timeout.
  void StreamIdleTimeout() { idle_timeouts_.Increment(); }
  // An error handled by logging it and going on: falcon_controller_errors_total{where}.
  void CountError(absl::string_view where) override;

 private:
  prometheus::Gauge& EventsGauge(falcon::v1::EventState state, falcon::v1::Cause cause)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Gauge& agents_connected_;
  prometheus::Counter& batches_;
  prometheus::Counter& duplicates_;
  prometheus::Counter& rejected_;
  prometheus::Counter& summaries_;
  prometheus::Counter& ops_;
  prometheus::Counter& stale_;
  prometheus::Counter& validation_results_;
  prometheus::Counter& directive_acks_;
  prometheus::Family<prometheus::Gauge>& events_;
  prometheus::Family<prometheus::Counter>& transitions_;
  prometheus::Histogram& delay_seconds_;
  prometheus::Histogram& delay_iterations_;
  prometheus::Family<prometheus::Gauge>& active_;
  prometheus::Family<prometheus::Gauge>& iteration_time_;
  prometheus::Family<prometheus::Gauge>& imbalance_;
  prometheus::Family<prometheus::Counter>& job_iterations_;
  prometheus::Family<prometheus::Counter>& environment_shifts_;
  prometheus::Family<prometheus::Counter>& directives_issued_;
  prometheus::Histogram& write_latency_;
  prometheus::Counter& write_errors_;
  prometheus::Histogram& sync_latency_;
  prometheus::Family<prometheus::Gauge>& repair_lost_;
  prometheus::Family<prometheus::Counter>& peer_refusals_;
  prometheus::Family<prometheus::Counter>& purged_;
  prometheus::Family<prometheus::Counter>& refusals_;
  prometheus::Counter& idle_timeouts_;
  prometheus::Family<prometheus::Counter>& errors_;

  absl::Mutex mu_;
  std::map<std::pair<int, int>, prometheus::Gauge*> events_by_key_ ABSL_GUARDED_BY(mu_);
  struct JobSeries {
    prometheus::Gauge* active = nullptr;
    prometheus::Gauge* iteration_time = nullptr;
    prometheus::Gauge* imbalance_stage = nullptr;
    prometheus::Gauge* imbalance_jitter = nullptr;
    prometheus::Counter* iterations = nullptr;
    prometheus::Counter* environment_shifts = nullptr;
  };
  std::map<std::string, JobSeries> per_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::controller::metrics

#endif  // FALCON_CONTROLLER_METRICS_CONTROLLER_METRICS_H_
