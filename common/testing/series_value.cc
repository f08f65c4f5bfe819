#include "common/testing/series_value.h"

namespace falcon::common::testing {

std::optional<double> SeriesValue(const std::vector<prometheus::MetricFamily>& families,
                                  const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const prometheus::ClientMetric::Label& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Untyped:
          return m.untyped.value;
        default:
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

}  // namespace falcon::common::testing
