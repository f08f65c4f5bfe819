#include "collective/world.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "collective/fault/fault_spec.h"
#include "collective/gloo/gloo_communicator.h"

#ifdef FALCON_HAVE_NCCL
#include "collective/nccl/nccl_communicator.h"
#endif

namespace falcon::collective {

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "gloo") return Backend::kGloo;
  if (name == "nccl") return Backend::kNccl;
  return absl::InvalidArgumentError(absl::StrCat("backend '", name, "': want gloo or nccl"));
}

bool NcclCompiledIn() {
#ifdef FALCON_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateWorld(const WorldOptions& options,
                                                          std::shared_ptr<CommRuntime> runtime) {
  if (options.backend == Backend::kGloo) {
    gloo::GlooWorldOptions g;
    g.rank = options.rank;
    g.world_size = options.world_size;
    g.rendezvous_dir = options.rendezvous_dir;
    g.hostname = options.hostname;
    g.timeout = options.timeout;
    g.world_comm_id = options.world_comm_id;
    return gloo::CreateGlooWorld(g, std::move(runtime));
  }
#ifdef FALCON_HAVE_NCCL
  nccl::NcclWorldOptions n;
  n.rank = options.rank;
  n.world_size = options.world_size;
  n.rendezvous_dir = options.rendezvous_dir;
  n.local_rank = options.local_rank;
  n.device = options.device;
  n.timeout = options.timeout;
  n.world_comm_id = options.world_comm_id;
  return CreateNcclWorld(n, std::move(runtime));
#else
  return absl::UnimplementedError(
      "backend nccl: this build has no NCCL (built with --config=nocuda or without CUDA)");
#endif
}

absl::StatusOr<WorldOptions> WorldOptionsFrom(const launch::RankEnv& env) {
  auto backend = ParseBackend(env.backend);
  if (!backend.ok()) return backend.status();
  WorldOptions o;
  o.backend = *backend;
  o.rank = env.rank;
  o.world_size = env.world_size;
  o.local_rank = env.local_rank;
  o.rendezvous_dir = env.rendezvous_dir;
  o.timeout = env.comm_timeout;
  o.hostname = env.host_address;
  return o;
}

absl::StatusOr<std::shared_ptr<CommRuntime>> MakeRuntime(const launch::RankEnv& env) {
  CommRuntimeOptions o;
  o.rank = env.rank;
  if (!env.faults.empty()) {
    auto plan = fault::LoadFaultSpec(env.faults);
    if (!plan.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("FALCON_FAULTS: ", plan.status().message()));
    }
    o.link_faults = plan->links;
  }
  return std::make_shared<CommRuntime>(o);
}

}  // namespace falcon::collective
