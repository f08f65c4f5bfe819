#include "common/testing/series_value.h"

#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace falcon::common::testing {
namespace {

TEST(SeriesValueTest, FindsTheSeriesWithExactlyTheseLabels) {
  prometheus::Registry registry;
  auto& counters = prometheus::BuildCounter().Name("t_total").Help("h").Register(registry);
  counters.Add({{"where", "a"}}).Increment(3);
  counters.Add({{"where", "a"}, {"node", "n"}}).Increment(7);
  auto& gauges = prometheus::BuildGauge().Name("t_gauge").Help("h").Register(registry);
  gauges.Add({{"job", "j"}}).Set(2.5);
  const auto families = registry.Collect();
  EXPECT_EQ(SeriesValue(families, "t_total", {{"where", "a"}}), 3.0);
  EXPECT_EQ(SeriesValue(families, "t_total", {{"where", "a"}, {"node", "n"}}), 7.0);
  EXPECT_EQ(SeriesValue(families, "t_gauge", {{"job", "j"}}), 2.5);
  EXPECT_EQ(SeriesValue(families, "t_total", {{"where", "b"}}), std::nullopt);
  EXPECT_EQ(SeriesValue(families, "t_gauge", {}), std::nullopt);
  EXPECT_EQ(SeriesValue(families, "absent", {{"where", "a"}}), std::nullopt);
}

}  // namespace
}  // namespace falcon::common::testing
