#include "controller/metrics/controller_metrics.h"

#include <algorithm>
#include <cctype>

namespace falcon::controller {
namespace {

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

std::string StrategyLabel(const falcon::v1::Directive& directive) {
  switch (directive.kind_case()) {
    case falcon::v1::Directive::kMicroBatchPlan:
      return "s2";
    case falcon::v1::Directive::kTopologyChange:
      return "s3";
    case falcon::v1::Directive::kCheckpointRestart:
      return "s4";
    case falcon::v1::Directive::kPause:
      return "pause";
    case falcon::v1::Directive::kResume:
      return "resume";
    case falcon::v1::Directive::kProfiling:
      return "profiling";
    default:
      return "unknown";
  }
}

ControllerMetrics::ControllerMetrics(prometheus::Registry& registry, const std::string& version)
    : agents_connected_(prometheus::BuildGauge()
                            .Name("falcon_controller_agents_connected")
                            .Help("Agents with a live telemetry stream")
                            .Register(registry)
                            .Add({})),
      batches_(prometheus::BuildCounter()
                   .Name("falcon_ingest_batches_total")
                   .Help("Telemetry batches stored and applied")
                   .Register(registry)
                   .Add({})),
      duplicates_(prometheus::BuildCounter()
                      .Name("falcon_ingest_duplicate_batches_total")
                      .Help("Telemetry batches received again (acknowledged, not re-applied)")
                      .Register(registry)
                      .Add({})),
      rejected_(prometheus::BuildCounter()
                    .Name("falcon_ingest_rejected_batches_total")
                    .Help("Telemetry batches rejected with a field error")
                    .Register(registry)
                    .Add({})),
      summaries_(prometheus::BuildCounter()
                     .Name("falcon_ingest_iteration_summaries_total")
                     .Help("Per-rank iteration summaries ingested")
                     .Register(registry)
                     .Add({})),
      ops_(prometheus::BuildCounter()
               .Name("falcon_ingest_op_records_total")
               .Help("Raw op records ingested (profiling)")
               .Register(registry)
               .Add({})),
      stale_(prometheus::BuildCounter()
                 .Name("falcon_ingest_stale_summaries_total")
                 .Help("Summaries skipped because their iteration was not above the rank's last")
                 .Register(registry)
                 .Add({})),
      validation_results_(prometheus::BuildCounter()
                              .Name("falcon_validation_results_total")
                              .Help("Validation results received from agents")
                              .Register(registry)
                              .Add({})),
      directive_acks_(prometheus::BuildCounter()
                          .Name("falcon_directive_acks_total")
                          .Help("Directive acknowledgements received from agents")
                          .Register(registry)
                          .Add({})),
      events_(prometheus::BuildGauge()
                  .Name("falcon_events")
                  .Help("Fail-slow events by current state and cause")
                  .Register(registry)),
      transitions_(prometheus::BuildCounter()
                       .Name("falcon_event_transitions_total")
                       .Help("Event state transitions by new state and cause")
                       .Register(registry)),
      delay_seconds_(prometheus::BuildHistogram()
                         .Name("falcon_detection_delay_seconds")
                         .Help("Time from a fail-slow's onset to its confirmation")
                         .Register(registry)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.5, 1, 2, 5, 10, 20, 30,
                                                                          60, 120, 300, 600})),
      delay_iterations_(prometheus::BuildHistogram()
                            .Name("falcon_detection_delay_iterations")
                            .Help("Iterations from a fail-slow's onset to its confirmation")
                            .Register(registry)
                            .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 3, 4, 5, 7, 10,
                                                                             15, 20, 50, 100})),
      active_(prometheus::BuildGauge()
                  .Name("falcon_active_fail_slows")
                  .Help("Active (not recovered or closed) fail-slow events of the job")
                  .Register(registry)),
      iteration_time_(prometheus::BuildGauge()
                          .Name("falcon_job_iteration_time_seconds")
                          .Help("Latest job iteration time (max over ranks)")
                          .Register(registry)),
      job_iterations_(prometheus::BuildCounter()
                          .Name("falcon_job_iterations_total")
                          .Help("Job iterations ingested (one per job iteration, all ranks)")
                          .Register(registry)),
      directives_issued_(prometheus::BuildCounter()
                             .Name("falcon_directives_issued_total")
                             .Help("Directives committed, by strategy (s2, s3, s4) or validation "
                                   "and profiling kind (pause, resume, profiling)")
                             .Register(registry)),
      write_latency_(
          prometheus::BuildHistogram()
              .Name("falcon_store_write_latency_seconds")
              .Help("RocksDB write (one atomic batch) latency")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3,
                                                               1e-2, 3e-2, 0.1, 0.3, 1})),
      write_errors_(prometheus::BuildCounter()
                        .Name("falcon_store_write_errors_total")
                        .Help("Failed RocksDB writes")
                        .Register(registry)
                        .Add({})),
      errors_(prometheus::BuildCounter()
                  .Name("falcon_controller_errors_total")
                  .Help("Errors handled by logging and going on, by site (where)")
                  .Register(registry)) {
  prometheus::BuildGauge()
      .Name("falcon_controller_build_info")
      .Help("Build information; the value is always 1")
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
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

void ControllerMetrics::JobIterationTime(const std::string& job, absl::Duration time) {
  absl::MutexLock lock(&mu_);
  JobSeries& slot = per_job_[job];
  if (slot.iteration_time == nullptr) slot.iteration_time = &iteration_time_.Add({{"job", job}});
  if (slot.iterations == nullptr) slot.iterations = &job_iterations_.Add({{"job", job}});
  slot.iteration_time->Set(absl::ToDoubleSeconds(time));
  slot.iterations->Increment();
}

void ControllerMetrics::CountError(absl::string_view where) {
  errors_.Add({{"where", std::string(where)}}).Increment();
}

void ControllerMetrics::DirectiveIssued(const falcon::v1::Directive& directive) {
  directives_issued_.Add({{"strategy", StrategyLabel(directive)}}).Increment();
}

void ControllerMetrics::RemoveJob(const std::string& job) {
  absl::MutexLock lock(&mu_);
  auto it = per_job_.find(job);
  if (it == per_job_.end()) return;
  if (it->second.active) active_.Remove(it->second.active);
  if (it->second.iteration_time) iteration_time_.Remove(it->second.iteration_time);
  if (it->second.iterations) job_iterations_.Remove(it->second.iterations);
  per_job_.erase(it);
}

void ControllerMetrics::StoreWrite(absl::Duration latency, bool ok) {
  write_latency_.Observe(absl::ToDoubleSeconds(latency));
  if (!ok) write_errors_.Increment();
}

}  // namespace falcon::controller
