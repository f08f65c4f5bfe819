// A fleet scenario: the jobs (layout and injected fault) that simulated agents run, in a compact
// text form passed to the agent processes. Job: "name,tp,pp,dp,ranks_per_node,fault"; fault: "-",
// "c:RANK:FACTOR:ONSET" (compute) or "l:SRC:FACTOR:ONSET" (link SRC -> its DP ring successor);
// jobs separated by ';'.
#ifndef FALCON_FLEET_SCENARIO_H_
#define FALCON_FLEET_SCENARIO_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/layout.h"
#include "fleet/model.h"

namespace falcon::fleet {

struct JobSpec {
  Layout layout;
  Fault fault;
};

struct Scenario {
  std::vector<JobSpec> jobs;

  // (job index, node of the job) of every simulated node, jobs in order.
  std::vector<std::pair<size_t, uint32_t>> Nodes() const;
  uint64_t Ranks() const;
};

std::string EncodeScenario(const Scenario& s);
// Errors: kInvalidArgument naming the job and field.
absl::StatusOr<Scenario> ParseScenario(const std::string& text);

}  // namespace falcon::fleet

#endif  // FALCON_FLEET_SCENARIO_H_
