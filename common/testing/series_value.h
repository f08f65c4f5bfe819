// Reads one series out of a prometheus-cpp registry in a test, without a scrape.
#ifndef FALCON_COMMON_TESTING_SERIES_VALUE_H_
#define FALCON_COMMON_TESTING_SERIES_VALUE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace falcon::common::testing {

// The value of the series `name`{labels} among `families` (prometheus::Registry::Collect()):
// the series whose labels are exactly `labels`; its counter, gauge or untyped value by the
// family's type. std::nullopt when there is no such series (or the family is a summary or a
// histogram).
std::optional<double> SeriesValue(const std::vector<prometheus::MetricFamily>& families,
                                  const std::string& name,
                                  const std::map<std::string, std::string>& labels);

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_SERIES_VALUE_H_
