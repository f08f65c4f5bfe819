#include "controller/metrics/controller_metrics.h"

#include <algorithm>
#include <cctype>

#include "common/directive_kind.h"
#include "controller/metrics/metric_table.h"

namespace falcon::controller::metrics {
namespace {

using common::metrics::AddCounterFamily;
using common::metrics::AddGaugeFamily;
using common::metrics::AddHistogramFamily;

std::string Lower(std::string s, size_t strip) {
  s = s.substr(std::min(strip, s.size()));
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::string EventStateLabel(falcon::v1::EventState state) {
  return Lower(falcon::v1::EventState_Name(state), sizeof("EVENT_STATE_") - 1);
}

std::string CauseLabel(falcon::v1::Cause cause) {
  if (cause == falcon::v1::CAUSE_UNSPECIFIED) return "none";
  return Lower(falcon::v1::Cause_Name(cause), sizeof("CAUSE_") - 1);
}

ControllerMetrics::ControllerMetrics(prometheus::Registry& registry, const std::string& version)
    : agents_connected_(AddGaugeFamily(registry, kAgentsConnected).Add({})),
      batches_(AddCounterFamily(registry, kIngestBatches).Add({})),
      duplicates_(AddCounterFamily(registry, kIngestDuplicateBatches).Add({})),
      rejected_(AddCounterFamily(registry, kIngestRejectedBatches).Add({})),
      summaries_(AddCounterFamily(registry, kIngestIterationSummaries).Add({})),
      ops_(AddCounterFamily(registry, kIngestOpRecords).Add({})),
      stale_(AddCounterFamily(registry, kIngestStaleSummaries).Add({})),
      validation_results_(AddCounterFamily(registry, kValidationResults).Add({})),
      directive_acks_(AddCounterFamily(registry, kDirectiveAcks).Add({})),
      events_(AddGaugeFamily(registry, kEvents)),
      transitions_(AddCounterFamily(registry, kEventTransitions)),
      delay_seconds_(AddHistogramFamily(registry, kDetectionDelaySeconds)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.5, 1, 2, 5, 10, 20, 30,
                                                                          60, 120, 300, 600})),
      delay_iterations_(AddHistogramFamily(registry, kDetectionDelayIterations)
                            .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 3, 4, 5, 7, 10,
                                                                             15, 20, 50, 100})),
      active_(AddGaugeFamily(registry, kActiveFailSlows)),
      iteration_time_(AddGaugeFamily(registry, kJobIterationTime)),
      imbalance_(AddGaugeFamily(registry, kWorkloadImbalance)),
      job_iterations_(AddCounterFamily(registry, kJobIterations)),
      environment_shifts_(AddCounterFamily(registry, kEnvironmentShifts)),
      directives_issued_(AddCounterFamily(registry, kDirectivesIssued)),
      write_latency_(
          AddHistogramFamily(registry, kStoreWriteLatency)
              .Add({}, prometheus::Histogram::BucketBoundaries{1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                                                               1e-2, 3e-2, 0.1, 0.3, 1})),
      write_errors_(AddCounterFamily(registry, kStoreWriteErrors).Add({})),
      sync_latency_(
          AddHistogramFamily(registry, kStoreSyncLatency)
              .Add({}, prometheus::Histogram::BucketBoundaries{1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                                                               1e-2, 3e-2, 0.1, 0.3, 1})),
      repair_lost_(AddGaugeFamily(registry, kStoreRepairLost)),
      peer_refusals_(AddCounterFamily(registry, kPeerRefusals)),
      purged_(AddCounterFamily(registry, kRetentionPurged)),
      refusals_(AddCounterFamily(registry, kLimitRefusals)),
      idle_timeouts_(AddCounterFamily(registry, kStreamIdleTimeouts).Add({})),
      errors_(AddCounterFamily(registry, kErrors)) {
  AddGaugeFamily(registry, kBuildInfo).Add({{"version", version}}).Set(1);
  // Every known site from the start, so the series exist (at 0) before the first error.
  for (const common::metrics::ErrorSite& site : kErrorSites) errors_.Add({{"where", site.where}});
  for (const char* check : kPeerChecks) peer_refusals_.Add({{"check", check}});
}

prometheus::Gauge& ControllerMetrics::EventsGauge(falcon::v1::EventState state,
                                                  falcon::v1::Cause cause) {
  auto key = std::make_pair(static_cast<int>(state), static_cast<int>(cause));
  auto it = events_by_key_.find(key);
  if (it != events_by_key_.end()) return *it->second;
  prometheus::Gauge& g =
      events_.Add({{"state", EventStateLabel(state)}, {"cause", CauseLabel(cause)}});
  events_by_key_[key] = &g;
  return g;
}

void ControllerMetrics::EventTransition(falcon::v1::EventState previous_state,
                                        falcon::v1::Cause previous_cause,
                                        falcon::v1::EventState state, falcon::v1::Cause cause) {
  absl::MutexLock lock(&mu_);
  if (previous_state != falcon::v1::EVENT_STATE_UNSPECIFIED) {
    EventsGauge(previous_state, previous_cause).Decrement();
  }
  EventsGauge(state, cause).Increment();
  transitions_.Add({{"state", EventStateLabel(state)}, {"cause", CauseLabel(cause)}}).Increment();
}

void ControllerMetrics::EventForgotten(falcon::v1::EventState state, falcon::v1::Cause cause) {
  absl::MutexLock lock(&mu_);
  EventsGauge(state, cause).Decrement();
}

void ControllerMetrics::DetectionDelay(absl::Duration delay, int64_t iterations) {
  delay_seconds_.Observe(absl::ToDoubleSeconds(delay));
  delay_iterations_.Observe(static_cast<double>(iterations));
}

void ControllerMetrics::ActiveFailSlows(const std::string& job, int active) {
  absl::MutexLock lock(&mu_);
  JobSeries& slot = per_job_[job];
  if (slot.active == nullptr) slot.active = &active_.Add({{"job", job}});
  slot.active->Set(active);
}

void ControllerMetrics::EnvironmentShift(const std::string& job) {
  absl::MutexLock lock(&mu_);
  JobSeries& slot = per_job_[job];
  if (slot.environment_shifts == nullptr) {
    slot.environment_shifts = &environment_shifts_.Add({{"job", job}});
  }
  slot.environment_shifts->Increment();
}

void ControllerMetrics::JobIterationTime(const std::string& job, absl::Duration time) {
  absl::MutexLock lock(&mu_);
  JobSeries& slot = per_job_[job];
  if (slot.iteration_time == nullptr) slot.iteration_time = &iteration_time_.Add({{"job", job}});
  if (slot.iterations == nullptr) slot.iterations = &job_iterations_.Add({{"job", job}});
  slot.iteration_time->Set(absl::ToDoubleSeconds(time));
  slot.iterations->Increment();
}

void ControllerMetrics::WorkloadImbalance(const std::string& job, double stage_ratio,
                                          double jitter_spread) {
  absl::MutexLock lock(&mu_);
  JobSeries& slot = per_job_[job];
  if (slot.imbalance_stage == nullptr) {
    slot.imbalance_stage = &imbalance_.Add({{"job", job}, {"kind", "stage"}});
    slot.imbalance_jitter = &imbalance_.Add({{"job", job}, {"kind", "jitter"}});
  }
  slot.imbalance_stage->Set(stage_ratio);
  slot.imbalance_jitter->Set(jitter_spread);
}

void ControllerMetrics::CountError(absl::string_view where) {
  errors_.Add({{"where", std::string(where)}}).Increment();
}

void ControllerMetrics::DirectiveIssued(const falcon::v1::Directive& directive) {
  directives_issued_.Add({{"strategy", std::string(common::DirectiveKindName(directive))}})
      .Increment();
}

void ControllerMetrics::RemoveJob(const std::string& job) {
  absl::MutexLock lock(&mu_);
  auto it = per_job_.find(job);
  if (it == per_job_.end()) return;
  if (it->second.active) active_.Remove(it->second.active);
  if (it->second.iteration_time) iteration_time_.Remove(it->second.iteration_time);
  if (it->second.iterations) job_iterations_.Remove(it->second.iterations);
  if (it->second.environment_shifts) environment_shifts_.Remove(it->second.environment_shifts);
  if (it->second.imbalance_stage) imbalance_.Remove(it->second.imbalance_stage);
  if (it->second.imbalance_jitter) imbalance_.Remove(it->second.imbalance_jitter);
  per_job_.erase(it);
}

void ControllerMetrics::StoreSync(absl::Duration latency, bool ok) {
  sync_latency_.Observe(absl::ToDoubleSeconds(latency));
  if (!ok) write_errors_.Increment();
}

void ControllerMetrics::StoreRepairLost(const std::string& kind, int64_t lost) {
  repair_lost_.Add({{"kind", kind}}).Set(static_cast<double>(lost));
}

void ControllerMetrics::StoreWrite(absl::Duration latency, bool ok) {
  write_latency_.Observe(absl::ToDoubleSeconds(latency));
  if (!ok) write_errors_.Increment();
}

void ControllerMetrics::RetentionPurged(absl::string_view kind, uint64_t n) {
  if (n == 0) return;
  purged_.Add({{"kind", std::string(kind)}}).Increment(static_cast<double>(n));
}

void ControllerMetrics::PeerRefused(absl::string_view check) {
  peer_refusals_.Add({{"check", std::string(check)}}).Increment();
}

void ControllerMetrics::LimitRefused(absl::string_view limit) {
  refusals_.Add({{"limit", std::string(limit)}}).Increment();
}

}  // namespace falcon::controller::metrics
