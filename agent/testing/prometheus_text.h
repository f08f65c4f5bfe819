// Test helpers: parse the Prometheus text exposition format (0.0.4) into samples. Pages are
// fetched with common::testing::HttpGet (common/testing/http_get.h).
#ifndef FALCON_AGENT_TESTING_PROMETHEUS_TEXT_H_
#define FALCON_AGENT_TESTING_PROMETHEUS_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::agent::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses every sample line; kInvalidArgument naming the line when one does not parse.
absl::StatusOr<std::vector<Sample>> ParsePrometheusText(const std::string& text);

// The value of the sample named `name` whose labels include all of `labels`; nullopt if none.
std::optional<double> FindSample(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels = {});

}  // namespace falcon::agent::testing

#endif  // FALCON_AGENT_TESTING_PROMETHEUS_TEXT_H_
