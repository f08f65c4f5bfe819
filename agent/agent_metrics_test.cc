#include "agent/agent_metrics.h"

#include <prometheus/registry.h>

#include <algorithm>
#include <iterator>
#include <map>
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
  errors.CountError(metric::where::kControllerStream);
  errors.CountError(metric::where::kControllerStream);
  for (const prometheus::MetricFamily& f : registry->Collect()) {
    if (f.name != metric::kErrors.name) continue;
    for (const auto& c : f.metric) {
      for (const auto& l : c.label) {
        if (l.name == "where" && l.value == metric::where::kControllerStream) {
          EXPECT_EQ(c.counter.value, 2);
          return;
        }
      }
    }
  }
  ADD_FAILURE() << "no " << metric::kErrors.name;
}

// falcon_agent_errors_total has a series per known site from the start, at 0; the list is well
// formed.
TEST(AgentMetricsTest, ErrorSitesExistAtZeroBeforeTheFirstError) {
  EXPECT_TRUE(common::metrics::CheckErrorSites(metric::kErrorSites).empty());
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics m(registry, "n1", "v");
  std::map<std::string, double> errors;
  for (const prometheus::MetricFamily& f : registry->Collect()) {
    if (f.name != metric::kErrors.name) continue;
    for (const auto& c : f.metric) {
      for (const auto& l : c.label) {
        if (l.name == "where") errors[l.value] = c.counter.value;
      }
    }
  }
  EXPECT_EQ(errors.size(), std::size(metric::kErrorSites));
  for (const common::metrics::ErrorSite& site : metric::kErrorSites)
    EXPECT_EQ(errors[site.where], 0);
}

}  // namespace
}  // namespace falcon::agent
