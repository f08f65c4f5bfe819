#include "controller/resource_limits.h"

#include "absl/strings/str_cat.h"

namespace falcon::controller {
namespace {

LimitRefusal Refuse(const char* limit, uint64_t value, const std::string& what) {
  return LimitRefusal{limit, absl::ResourceExhaustedError(absl::StrCat(
                                 limit, " (", value, ") exceeded: ", what, "; raise --", limit,
                                 " on the controller to accept it"))};
}

std::optional<LimitRefusal> CheckWorldSize(const std::string& agent_id,
                                           const falcon::v1::JobRegistration& reg,
                                           const ResourceLimits& limits) {
  if (reg.world_size() <= limits.max_ranks_per_job) return std::nullopt;
  return Refuse(kMaxRanksPerJob, limits.max_ranks_per_job,
                absl::StrCat("job '", reg.job(), "' registered by agent '", agent_id,
                             "' has world_size ", reg.world_size()));
}

}  // namespace

absl::Status ResourceLimits::Validate() const {
  if (max_ranks_per_job < 1 || max_ranks_per_job > (1u << 20)) {
    return absl::InvalidArgumentError("max_ranks_per_job: must be in [1, 1048576]");
  }
  if (max_jobs_per_agent < 1 || max_jobs_per_agent > 1'000'000) {
    return absl::InvalidArgumentError("max_jobs_per_agent: must be in [1, 1000000]");
  }
  if (max_streams_per_peer < 1 || max_streams_per_peer > 1'000'000) {
    return absl::InvalidArgumentError("max_streams_per_peer: must be in [1, 1000000]");
  }
  return absl::OkStatus();
}

std::optional<LimitRefusal> CheckHelloLimits(const falcon::v1::AgentHello& hello,
                                             const ResourceLimits& limits) {
  if (hello.jobs_size() > static_cast<int64_t>(limits.max_jobs_per_agent)) {
    return Refuse(kMaxJobsPerAgent, limits.max_jobs_per_agent,
                  absl::StrCat("agent '", hello.agent_id(), "' (node ", hello.node(), ") lists ",
                               hello.jobs_size(), " jobs in its hello"));
  }
  for (const falcon::v1::JobRegistration& reg : hello.jobs()) {
    if (auto r = CheckWorldSize(hello.agent_id(), reg, limits)) return r;
  }
  return std::nullopt;
}

std::optional<LimitRefusal> CheckRegistrationLimits(const std::string& agent_id,
                                                    const falcon::v1::JobRegistration& reg,
                                                    bool new_for_agent, size_t agent_jobs,
                                                    const ResourceLimits& limits) {
  if (auto r = CheckWorldSize(agent_id, reg, limits)) return r;
  if (new_for_agent && agent_jobs >= limits.max_jobs_per_agent) {
    return Refuse(kMaxJobsPerAgent, limits.max_jobs_per_agent,
                  absl::StrCat("agent '", agent_id, "' already has ", agent_jobs,
                               " jobs and registers job '", reg.job(), "'"));
  }
  return std::nullopt;
}

std::optional<LimitRefusal> CheckStreamLimit(const std::string& peer, size_t open,
                                             const ResourceLimits& limits) {
  if (open < limits.max_streams_per_peer) return std::nullopt;
  return Refuse(kMaxStreamsPerPeer, limits.max_streams_per_peer,
                absl::StrCat("peer ", peer, " already has ", open, " open streams"));
}

}  // namespace falcon::controller
