#include "agent/agent_metrics.h"

#include <prometheus/registry.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_metrics_table.h"
#include "common/metrics/metric_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

// Every family the agent registers is declared in the table with its type and help, and its
// series carry exactly the declared labels; the table itself is well formed.
TEST(AgentMetricsTest, RegistrationMatchesTheTable) {
  EXPECT_TRUE(common::metrics::CheckMetricTable(metric::kAll, metric::kPrefix).empty());
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "n1", "v");
  m.AddRank("j", 0, -1);
  m.AddJob("j");
  m.CountError("test_site");
  EXPECT_THAT(common::metrics::RegistryMismatches(registry->Collect(), metric::kAll),
              ::testing::IsEmpty());
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
