#include "controller/metrics/controller_metrics.h"

#include <prometheus/text_serializer.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace falcon::controller {
namespace {

// Value of the series with exactly these labels, -1 when absent.
double Value(prometheus::Registry& registry, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      if (f.type == prometheus::MetricType::Counter) return m.counter.value;
      if (f.type == prometheus::MetricType::Gauge) return m.gauge.value;
      if (f.type == prometheus::MetricType::Histogram) {
        return static_cast<double>(m.histogram.sample_count);
      }
    }
  }
  return -1;
}

TEST(ControllerMetricsTest, EventsMoveBetweenStates) {
  prometheus::Registry registry;
  ControllerMetrics m(registry, "test-1");
  EXPECT_EQ(Value(registry, "falcon_controller_build_info", {{"version", "test-1"}}), 1);
  m.EventTransition(falcon::v1::EVENT_STATE_UNSPECIFIED, falcon::v1::CAUSE_UNSPECIFIED,
                    falcon::v1::EVENT_STATE_CONFIRMED, falcon::v1::CAUSE_UNSPECIFIED);
  m.EventTransition(falcon::v1::EVENT_STATE_CONFIRMED, falcon::v1::CAUSE_UNSPECIFIED,
                    falcon::v1::EVENT_STATE_LOCALIZED, falcon::v1::CAUSE_COMPUTE);
  EXPECT_EQ(Value(registry, "falcon_events", {{"state", "confirmed"}, {"cause", "none"}}), 0);
  EXPECT_EQ(Value(registry, "falcon_events", {{"state", "localized"}, {"cause", "compute"}}), 1);
  EXPECT_EQ(Value(registry, "falcon_event_transitions_total",
                  {{"state", "localized"}, {"cause", "compute"}}),
            1);
  m.DetectionDelay(absl::Seconds(3), 3);
  EXPECT_EQ(Value(registry, "falcon_detection_delay_seconds", {}), 1);
}

TEST(ControllerMetricsTest, PerJobSeriesAreRemovedWithTheJob) {
  prometheus::Registry registry;
  ControllerMetrics m(registry, "v");
  m.ActiveFailSlows("j", 1);
  m.JobIterationTime("j", absl::Milliseconds(250));
  EXPECT_EQ(Value(registry, "falcon_active_fail_slows", {{"job", "j"}}), 1);
  EXPECT_DOUBLE_EQ(Value(registry, "falcon_job_iteration_time_seconds", {{"job", "j"}}), 0.25);
  m.JobIterationTime("j", absl::Milliseconds(300));
  EXPECT_DOUBLE_EQ(Value(registry, "falcon_job_iteration_time_seconds", {{"job", "j"}}), 0.3);
  EXPECT_EQ(Value(registry, "falcon_job_iterations_total", {{"job", "j"}}), 2);
  m.RemoveJob("j");
  EXPECT_EQ(Value(registry, "falcon_active_fail_slows", {{"job", "j"}}), -1);
  EXPECT_EQ(Value(registry, "falcon_job_iteration_time_seconds", {{"job", "j"}}), -1);
  EXPECT_EQ(Value(registry, "falcon_job_iterations_total", {{"job", "j"}}), -1);
  m.Summaries(5);
  m.OpRecords(7);
  m.StoreWrite(absl::Microseconds(20), false);
  EXPECT_EQ(Value(registry, "falcon_ingest_iteration_summaries_total", {}), 5);
  EXPECT_EQ(Value(registry, "falcon_ingest_op_records_total", {}), 7);
  EXPECT_EQ(Value(registry, "falcon_store_write_errors_total", {}), 1);
  EXPECT_EQ(Value(registry, "falcon_store_write_latency_seconds", {}), 1);
}

TEST(ControllerMetricsTest, DirectivesAreCountedByStrategy) {
  prometheus::Registry registry;
  ControllerMetrics m(registry, "v");
  falcon::v1::Directive s2;
  s2.mutable_micro_batch_plan();
  falcon::v1::Directive s3;
  s3.mutable_topology_change();
  falcon::v1::Directive pause;
  pause.mutable_pause();
  m.DirectiveIssued(s2);
  m.DirectiveIssued(s2);
  m.DirectiveIssued(s3);
  m.DirectiveIssued(pause);
  EXPECT_EQ(Value(registry, "falcon_directives_issued_total", {{"strategy", "s2"}}), 2);
  EXPECT_EQ(Value(registry, "falcon_directives_issued_total", {{"strategy", "s3"}}), 1);
  EXPECT_EQ(Value(registry, "falcon_directives_issued_total", {{"strategy", "pause"}}), 1);
  EXPECT_EQ(Value(registry, "falcon_directives_issued_total", {{"strategy", "s4"}}), -1);
  falcon::v1::Directive s4;
  s4.mutable_checkpoint_restart();
  EXPECT_EQ(StrategyLabel(s4), "s4");
  EXPECT_EQ(StrategyLabel(falcon::v1::Directive()), "unknown");
}

}  // namespace
}  // namespace falcon::controller
