// Entry point for the trainer: the world communicator of this rank on the chosen backend, from
// explicit options or from the environment falcon_launch sets (launch/rank_env.h).
//
//   auto env = RankEnvFromEnvironment();
//   auto runtime = MakeRuntime(*env);          // observer, pause gate, link faults, iteration
//   auto world = CreateWorld(WorldOptionsFrom(*env), runtime);
//   auto dp = (*world)->Split(pp_index, dp_index, {CommKind::COMM_KIND_DP, "dp"});
#ifndef FALCON_COLLECTIVE_WORLD_H_
#define FALCON_COLLECTIVE_WORLD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"
#include "collective/launch/rank_env.h"

namespace falcon::collective {

enum class Backend { kGloo, kNccl };

// "gloo" or "nccl"; kInvalidArgument otherwise.
absl::StatusOr<Backend> ParseBackend(absl::string_view name);

struct WorldOptions {
  Backend backend = Backend::kGloo;
  int rank = -1;
  int world_size = 0;
  int local_rank = 0;
  std::string rendezvous_dir;
  absl::Duration timeout = absl::Seconds(60);
  uint64_t world_comm_id = 0;          // 0: WorldCommId(world_size).
  std::string hostname = "127.0.0.1";  // Gloo listen address.
  int device = -1;                     // NCCL device; -1: local_rank % device count.
};

// True when this build contains the NCCL backend (default variant with a CUDA toolkit).
bool NcclCompiledIn();

// Creates the world communicator. kUnimplemented for NCCL in a build without it; otherwise the
// backend's errors (see gloo/gloo_communicator.h, nccl/nccl_communicator.h).
absl::StatusOr<std::unique_ptr<Communicator>> CreateWorld(const WorldOptions& options,
                                                          std::shared_ptr<CommRuntime> runtime);

// WorldOptions for the rank described by `env`.
absl::StatusOr<WorldOptions> WorldOptionsFrom(const launch::RankEnv& env);

// A CommRuntime for `env`'s rank with the link faults of env.faults (kInvalidArgument when the
// spec does not parse).
absl::StatusOr<std::shared_ptr<CommRuntime>> MakeRuntime(const launch::RankEnv& env);

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_WORLD_H_
