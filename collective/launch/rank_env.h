// The environment falcon_launch gives each rank process, parsed in one place (the trainer and
// CreateWorldFromEnv use it):
//   FALCON_RANK, FALCON_WORLD_SIZE            global rank and number of ranks
//   FALCON_LOCAL_RANK, FALCON_LOCAL_WORLD_SIZE rank inside its emulated node, ranks per node
//   FALCON_NODE, FALCON_NODE_INDEX, FALCON_NNODES  node name ("node0"...), its index, node count
//   FALCON_RENDEZVOUS                         store directory (fresh per launch)
//   FALCON_DP, FALCON_PP, FALCON_TP           parallel sizes (DP x PP x TP == world size)
//   FALCON_FAULTS                             fault spec (fault_spec.h), optional
//   FALCON_BACKEND                            "gloo" or "nccl", optional (default gloo)
//   FALCON_COMM_TIMEOUT_MS                    communicator timeout, optional
//   FALCON_HOST_ADDRESS                       IPv4 address of the rank's node, where its Gloo
//                                             pairs listen (so cross-node bytes cross the node's
//                                             interface); optional, default 127.0.0.1
#ifndef FALCON_COLLECTIVE_LAUNCH_RANK_ENV_H_
#define FALCON_COLLECTIVE_LAUNCH_RANK_ENV_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::collective::launch {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string node = "node0";
  int node_index = 0;
  int num_nodes = 1;
  std::string rendezvous_dir;
  int dp = 1;
  int pp = 1;
  int tp = 1;
  std::string faults;  // Empty: none.
  std::string backend = "gloo";
  absl::Duration comm_timeout = absl::Seconds(60);
  std::string host_address = "127.0.0.1";

  // (name, value) pairs of the variables above, as falcon_launch sets them.
  std::vector<std::pair<std::string, std::string>> ToVariables() const;
};

// Parses the variables through `lookup` (returns nullptr when unset). kFailedPrecondition when
// FALCON_RANK is unset (not started by falcon_launch); kInvalidArgument naming the variable for
// a malformed or inconsistent value.
absl::StatusOr<RankEnv> ParseRankEnv(const std::function<const char*(const char*)>& lookup);

// ParseRankEnv over the process environment.
absl::StatusOr<RankEnv> RankEnvFromEnvironment();

}  // namespace falcon::collective::launch

#endif  // FALCON_COLLECTIVE_LAUNCH_RANK_ENV_H_
