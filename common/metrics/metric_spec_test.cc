#include "common/metrics/metric_spec.h"

#include <prometheus/registry.h>

#include "gtest/gtest.h"

namespace falcon::common::metrics {
namespace {

constexpr MetricSpec kRequests{"falcon_test_requests_total", MetricType::kCounter, "requests",
                               "job", "Requests | answered"};
constexpr MetricSpec kUp{"falcon_test_up", MetricType::kGauge, "1", "", "1 while up"};
constexpr MetricSpec kLatency{"falcon_test_latency_seconds", MetricType::kHistogram, "seconds",
                              "job,rank", "Latency"};

TEST(MetricSpecTest, RegistersFamiliesFromTheSpec) {
  prometheus::Registry registry;
  AddCounterFamily(registry, kRequests, {{"node", "n1"}}).Add({{"job", "j"}}).Increment(2);
  AddGaugeFamily(registry, kUp).Add({}).Set(1);
  AddHistogramFamily(registry, kLatency)
      .Add({{"job", "j"}, {"rank", "0"}}, prometheus::Histogram::BucketBoundaries{0.1, 1})
      .Observe(0.5);
  const auto families = registry.Collect();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[0].name, "falcon_test_requests_total");
  EXPECT_EQ(families[0].help, "Requests | answered");
  EXPECT_EQ(families[0].type, prometheus::MetricType::Counter);
  EXPECT_EQ(families[0].metric[0].counter.value, 2);
  EXPECT_EQ(families[1].type, prometheus::MetricType::Gauge);
  EXPECT_EQ(families[2].type, prometheus::MetricType::Histogram);
}

TEST(MetricSpecDeathTest, ATypeMismatchAborts) {
  prometheus::Registry registry;
  EXPECT_DEATH(AddGaugeFamily(registry, kRequests), "declared a counter, registered as a gauge");
}

TEST(MetricSpecTest, ErrorSites) {
  const ErrorSite good[] = {{"store_write", "A write failed | retried"}, {"tick2", "x"}};
  EXPECT_TRUE(CheckErrorSites(good).empty());
  EXPECT_EQ(ErrorSitesMarkdownTable(good),
            "| `where` | What happened |\n"
            "|---|---|\n"
            "| `store_write` | A write failed \\| retried |\n"
            "| `tick2` | x |\n");
  const ErrorSite bad[] = {
      {"store_write", "a"}, {"store_write", "b"}, {"Bad-Site", "c"}, {"", "d"}, {"no_what", ""}};
  EXPECT_EQ(CheckErrorSites(bad),
            (std::vector<std::string>{"store_write: listed twice", "'Bad-Site': not snake_case",
                                      "'': not snake_case", "no_what: no description"}));
}

TEST(MetricSpecTest, LabelNames) {
  EXPECT_EQ(LabelNames(kLatency), (std::vector<std::string>{"job", "rank"}));
  EXPECT_TRUE(LabelNames(kUp).empty());
}

TEST(MetricSpecTest, MarkdownTable) {
  const MetricSpec specs[] = {kRequests, kUp};
  EXPECT_EQ(MetricsMarkdownTable(specs),
            "| Name | Type | Unit | Labels | Help |\n"
            "|---|---|---|---|---|\n"
            "| `falcon_test_requests_total` | counter | requests | job | Requests \\| answered |\n"
            "| `falcon_test_up` | gauge | 1 |  | 1 while up |\n");
}

TEST(MetricSpecTest, CheckMetricTable) {
  const MetricSpec good[] = {kRequests, kUp, kLatency};
  EXPECT_TRUE(CheckMetricTable(good, "falcon_test_").empty());
  const MetricSpec bad[] = {
      kRequests,
      kRequests,                                                            // twice
      {"falcon_other_up", MetricType::kGauge, "1", "", "x"},                // prefix
      {"falcon_test_requests", MetricType::kCounter, "requests", "", "x"},  // no _total
      {"falcon_test_up_total", MetricType::kGauge, "1", "", "x"},           // gauge with _total
      {"falcon_test_x_count", MetricType::kHistogram, "1", "", "x"},        // suffix
      {"falcon_test_nohelp", MetricType::kGauge, "", "", ""},               // no help, no unit
  };
  EXPECT_EQ(CheckMetricTable(bad, "falcon_test_").size(), 7u);
}

TEST(MetricSpecTest, RegistryMismatchesNamesEachDifference) {
  prometheus::Registry registry;
  AddCounterFamily(registry, kRequests).Add({{"job", "j"}}).Increment();
  AddGaugeFamily(registry, kUp).Add({{"extra", "x"}}).Set(1);
  const std::vector<MetricSpec> ok = {kRequests};
  prometheus::Registry only_requests;
  AddCounterFamily(only_requests, kRequests).Add({{"job", "j"}}).Increment();
  EXPECT_TRUE(RegistryMismatches(only_requests.Collect(), ok).empty());

  const std::vector<MetricSpec> table = {kRequests, kUp, kLatency};
  const std::vector<std::string> problems = RegistryMismatches(registry.Collect(), table);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "falcon_test_up: labels {extra}, table says {}");
  EXPECT_EQ(problems[1], "falcon_test_latency_seconds: in the table but not collected");
}

}  // namespace
}  // namespace falcon::common::metrics
