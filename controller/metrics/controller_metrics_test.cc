#include "controller/metrics/controller_metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics/metric_spec.h"
#include "controller/metrics/metric_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::controller::metrics {
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
  EXPECT_EQ(Value(registry, kBuildInfo.name, {{"version", "test-1"}}), 1);
  m.EventTransition(falcon::v1::EVENT_STATE_UNSPECIFIED, falcon::v1::CAUSE_UNSPECIFIED,
                    falcon::v1::EVENT_STATE_CONFIRMED, falcon::v1::CAUSE_UNSPECIFIED);
  m.EventTransition(falcon::v1::EVENT_STATE_CONFIRMED, falcon::v1::CAUSE_UNSPECIFIED,
                    falcon::v1::EVENT_STATE_LOCALIZED, falcon::v1::CAUSE_COMPUTE);
  EXPECT_EQ(Value(registry, kEvents.name, {{"state", "confirmed"}, {"cause", "none"}}), 0);
  EXPECT_EQ(Value(registry, kEvents.name, {{"state", "localized"}, {"cause", "compute"}}), 1);
  EXPECT_EQ(Value(registry, kEventTransitions.name, {{"state", "localized"}, {"cause", "compute"}}),
            1);
  m.DetectionDelay(absl::Seconds(3), 3);
  EXPECT_EQ(Value(registry, kDetectionDelaySeconds.name, {}), 1);
}

TEST(ControllerMetricsTest, PerJobSeriesAreRemovedWithTheJob) {
  prometheus::Registry registry;
  ControllerMetrics m(registry, "v");
  m.ActiveFailSlows("j", 1);
  m.JobIterationTime("j", absl::Milliseconds(250));
  EXPECT_EQ(Value(registry, kActiveFailSlows.name, {{"job", "j"}}), 1);
  EXPECT_DOUBLE_EQ(Value(registry, kJobIterationTime.name, {{"job", "j"}}), 0.25);
  m.JobIterationTime("j", absl::Milliseconds(300));
  EXPECT_DOUBLE_EQ(Value(registry, kJobIterationTime.name, {{"job", "j"}}), 0.3);
  EXPECT_EQ(Value(registry, kJobIterations.name, {{"job", "j"}}), 2);
  m.RemoveJob("j");
  EXPECT_EQ(Value(registry, kActiveFailSlows.name, {{"job", "j"}}), -1);
  EXPECT_EQ(Value(registry, kJobIterationTime.name, {{"job", "j"}}), -1);
  EXPECT_EQ(Value(registry, kJobIterations.name, {{"job", "j"}}), -1);
  m.Summaries(5);
  m.OpRecords(7);
  m.StoreWrite(absl::Microseconds(20), false);
  EXPECT_EQ(Value(registry, kIngestIterationSummaries.name, {}), 5);
  EXPECT_EQ(Value(registry, kIngestOpRecords.name, {}), 7);
  EXPECT_EQ(Value(registry, kStoreWriteErrors.name, {}), 1);
  EXPECT_EQ(Value(registry, kStoreWriteLatency.name, {}), 1);
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
  EXPECT_EQ(Value(registry, kDirectivesIssued.name, {{"strategy", "s2"}}), 2);
  EXPECT_EQ(Value(registry, kDirectivesIssued.name, {{"strategy", "s3"}}), 1);
  EXPECT_EQ(Value(registry, kDirectivesIssued.name, {{"strategy", "pause"}}), 1);
  EXPECT_EQ(Value(registry, kDirectivesIssued.name, {{"strategy", "s4"}}), -1);
}

// Every family the controller registers is declared in the table, with its type, and its series
// carry only the declared labels; the table itself is well formed.
TEST(ControllerMetricsTest, RegistrationMatchesTheTable) {
  EXPECT_TRUE(common::metrics::CheckMetricTable(kAll, kPrefix).empty());
  prometheus::Registry registry;
  ControllerMetrics m(registry, "v");
  falcon::v1::Directive s2;
  s2.mutable_micro_batch_plan();
  m.DirectiveIssued(s2);
  m.EventTransition(falcon::v1::EVENT_STATE_UNSPECIFIED, falcon::v1::CAUSE_UNSPECIFIED,
                    falcon::v1::EVENT_STATE_CONFIRMED, falcon::v1::CAUSE_UNSPECIFIED);
  m.ActiveFailSlows("j", 1);
  m.JobIterationTime("j", absl::Seconds(1));
  m.WorkloadImbalance("j", 1.6, 0);
  m.EnvironmentShift("j");
  m.CountError("test_site");
  m.StoreRepairLost("jobs", 2);
  m.RetentionPurged("job", 2);
  m.LimitRefused("max_ranks_per_job");
  EXPECT_THAT(common::metrics::RegistryMismatches(registry.Collect(), kAll), ::testing::IsEmpty());
}

// falcon_controller_errors_total has a series per known site from the start, at 0; the list is
// well formed.
TEST(ControllerMetricsTest, ErrorSitesExistAtZeroBeforeTheFirstError) {
  EXPECT_TRUE(common::metrics::CheckErrorSites(kErrorSites).empty());
  prometheus::Registry registry;
  ControllerMetrics m(registry, "v");
  auto errors = [&]() {
    std::map<std::string, double> out;
    for (const auto& f : registry.Collect()) {
      if (f.name != kErrors.name) continue;
      for (const auto& c : f.metric) out[c.label.at(0).value] = c.counter.value;
    }
    return out;
  };
  std::map<std::string, double> before = errors();
  EXPECT_EQ(before.size(), std::size(kErrorSites));
  for (const common::metrics::ErrorSite& site : kErrorSites) EXPECT_EQ(before[site.where], 0);
  m.CountError(where::kDirectiveTimedOut);
  EXPECT_EQ(errors()[where::kDirectiveTimedOut], 1);
}

}  // namespace
}  // namespace falcon::controller::metrics
