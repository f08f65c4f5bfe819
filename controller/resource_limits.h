// Bounds on the state a peer can make the controller hold
// (docs/operations.md#retention-and-limits): ranks per job, jobs per agent, open streams per peer.
// A registration or stream beyond a limit is refused with RESOURCE_EXHAUSTED whose message names
// the limit (as its flag), the peer and the job, and is counted in
// falcon_controller_limit_refusals_total{limit}. Pure functions; the streams-per-peer count lives
// in the gRPC adapters (service/stream_limiter.h).
#ifndef FALCON_CONTROLLER_RESOURCE_LIMITS_H_
#define FALCON_CONTROLLER_RESOURCE_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller {

// Limit names: the flags that set them and the `limit` label of the refusals metric.
inline constexpr char kMaxRanksPerJob[] = "max_ranks_per_job";
inline constexpr char kMaxJobsPerAgent[] = "max_jobs_per_agent";
inline constexpr char kMaxStreamsPerPeer[] = "max_streams_per_peer";

struct ResourceLimits {
  // Largest world_size a job may register, [1, 1048576]. A job's record and its Control API view
  // grow with its ranks (about 100 bytes each, plus communicator members); the default keeps one
  // job well inside gRPC's 4 MiB default message size. Default: 16384.
  uint32_t max_ranks_per_job = 16384;
  // Most jobs one agent may have a part in (a node rarely runs more than a few), [1, 1000000].
  // Default: 256.
  uint32_t max_jobs_per_agent = 256;
  // Most open streams (agent Telemetry.Connect plus Control.WatchEvents) from one peer host,
  // [1, 1000000]. Default: 64.
  uint32_t max_streams_per_peer = 64;

  absl::Status Validate() const;
};

// A refusal: which limit, and the RESOURCE_EXHAUSTED status naming it, the peer and the job.
struct LimitRefusal {
  const char* limit = "";
  absl::Status status;
};

// An AgentHello: at most max_jobs_per_agent jobs, each with world_size <= max_ranks_per_job.
std::optional<LimitRefusal> CheckHelloLimits(const falcon::v1::AgentHello& hello,
                                             const ResourceLimits& limits);

// One registration sent by `agent_id` (in a batch): world_size <= max_ranks_per_job and, when the
// agent has no part in the job yet (`new_for_agent`), `agent_jobs` (the jobs it has a part in
// now) below max_jobs_per_agent.
std::optional<LimitRefusal> CheckRegistrationLimits(const std::string& agent_id,
                                                    const falcon::v1::JobRegistration& reg,
                                                    bool new_for_agent, size_t agent_jobs,
                                                    const ResourceLimits& limits);

// A new stream from `peer` (a host, see service/stream_limiter.h) that already has `open` streams.
std::optional<LimitRefusal> CheckStreamLimit(const std::string& peer, size_t open,
                                             const ResourceLimits& limits);

}  // namespace falcon::controller

#endif  // FALCON_CONTROLLER_RESOURCE_LIMITS_H_
