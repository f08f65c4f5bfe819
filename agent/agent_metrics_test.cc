#include "agent/agent_metrics.h"

#include <prometheus/registry.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_metrics_table.h"
#include "common/metrics/metric_spec.h"
#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

// Every family the agent registers is declared in the table with its type and help, and its
// series carry exactly the declared labels; the table itself is well formed.
TEST(AgentMetricsTest, RegistrationMatchesTheTable) {
  EXPECT_TRUE(common::CheckMetricTable(metric::kAll, metric::kPrefix).empty());
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "n1", "v");
  m.AddRank("j", 0, -1);
  m.AddJob("j");
  m.CountError("test_site");
  const auto families = registry->Collect();
  EXPECT_EQ(families.size(), std::size(metric::kAll));
  for (const prometheus::MetricFamily& f : families) {
    const common::MetricSpec* spec = nullptr;
    for (const common::MetricSpec& s : metric::kAll) {
      if (f.name == s.name) spec = &s;
    }
    ASSERT_NE(spec, nullptr) << f.name << " is not in agent_metrics_table.h";
    EXPECT_EQ(f.help, spec->help);
    const prometheus::MetricType want =
        spec->type == common::MetricType::kCounter ? prometheus::MetricType::Counter
        : spec->type == common::MetricType::kGauge ? prometheus::MetricType::Gauge
                                                   : prometheus::MetricType::Histogram;
    EXPECT_EQ(f.type, want) << f.name;
    std::vector<std::string> want_labels = common::LabelNames(*spec);
    std::sort(want_labels.begin(), want_labels.end());
    EXPECT_FALSE(f.metric.empty()) << f.name << " has no series in this test";
    for (const prometheus::ClientMetric& cm : f.metric) {
      std::vector<std::string> got;
      for (const auto& l : cm.label) got.push_back(l.name);
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want_labels) << f.name;
    }
  }
}

TEST(AgentMetricsTest, ErrorsAreCountedBySite) {
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "n1", "v");
  common::ErrorCounter& errors = m;
  errors.CountError("controller_link_write");
  errors.CountError("controller_link_write");
  for (const prometheus::MetricFamily& f : registry->Collect()) {
    if (f.name != metric::kErrors.name) continue;
    ASSERT_EQ(f.metric.size(), 1u);
    EXPECT_EQ(f.metric[0].counter.value, 2);
    return;
  }
  ADD_FAILURE() << "no " << metric::kErrors.name;
}

}  // namespace
}  // namespace falcon::agent
