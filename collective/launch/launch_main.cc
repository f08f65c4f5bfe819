// falcon_launch --nproc N [--dp D] [--pp P] [--tp T] [--nodes K] [--backend gloo|nccl]
//               [--faults SPEC|@FILE] [--comm_timeout_ms MS] [--pin_cpus] [--grace_ms MS]
//               -- PROGRAM ARGS...
// Starts N ranks of PROGRAM on this machine as K emulated nodes (see launch/launcher.h for the
// environment and exit status).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "cluster/cluster_spec.h"
#include "collective/launch/launcher.h"

ABSL_FLAG(int, nproc, 0, "number of rank processes");
ABSL_FLAG(int, dp, 0, "data-parallel size (0: nproc / (pp * tp))");
ABSL_FLAG(int, pp, 1, "pipeline-parallel size");
ABSL_FLAG(int, tp, 1, "tensor-parallel size");
ABSL_FLAG(int, nodes, 1, "emulated nodes (must divide nproc)");
ABSL_FLAG(std::string, backend, "gloo", "communicator backend for the ranks: gloo or nccl");
ABSL_FLAG(std::string, faults, "", "fault spec or @file (collective/fault/fault_spec.h)");
ABSL_FLAG(int, comm_timeout_ms, 60000, "communicator timeout passed to the ranks, 1..600000");
ABSL_FLAG(bool, pin_cpus, false, "pin rank r to the r-th allowed CPU");
ABSL_FLAG(int, grace_ms, 5000, "time between SIGTERM and SIGKILL when stopping ranks, 0..600000");
ABSL_FLAG(std::string, rendezvous_root, "", "parent of the fresh store dir (default $TMPDIR)");
ABSL_FLAG(bool, keep_rendezvous, false, "keep the store dir after the job");
ABSL_FLAG(std::string, cluster, "",
          "cluster description (cluster/cluster_spec.h) whose nodes the ranks run on (inside "
          "each node's network namespace, FALCON_HOST_ADDRESS = its address); default: loopback");
ABSL_FLAG(std::string, rank_table, "",
          "write the rank table (rank, node, pid) here once every rank has started");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "falcon_launch --nproc N [--dp D] [--pp P] [--tp T] [--nodes K] -- PROGRAM ARGS...");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  falcon::collective::launch::LaunchOptions o;
  o.nproc = absl::GetFlag(FLAGS_nproc);
  o.dp = absl::GetFlag(FLAGS_dp);
  o.pp = absl::GetFlag(FLAGS_pp);
  o.tp = absl::GetFlag(FLAGS_tp);
  o.nodes = absl::GetFlag(FLAGS_nodes);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.faults = absl::GetFlag(FLAGS_faults);
  o.comm_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_comm_timeout_ms));
  o.pin_cpus = absl::GetFlag(FLAGS_pin_cpus);
  o.grace = absl::Milliseconds(absl::GetFlag(FLAGS_grace_ms));
  o.rendezvous_root = absl::GetFlag(FLAGS_rendezvous_root);
  o.keep_rendezvous = absl::GetFlag(FLAGS_keep_rendezvous);
  o.rank_table_path = absl::GetFlag(FLAGS_rank_table);
  for (size_t i = 1; i < rest.size(); ++i) o.command.emplace_back(rest[i]);
  if (const std::string path = absl::GetFlag(FLAGS_cluster); !path.empty()) {
    auto spec = falcon::cluster::ReadClusterSpec(path);
    if (!spec.ok()) {
      std::fprintf(stderr, "falcon_launch: --cluster: %s\n",
                   std::string(spec.status().message()).c_str());
      return 2;
    }
    o.cluster = *std::move(spec);
  }
  auto result = falcon::collective::launch::RunLaunch(o);
  if (!result.ok()) {
    std::fprintf(stderr, "falcon_launch: %s\n", std::string(result.status().message()).c_str());
    return 2;
  }
  return result->exit_code;
}
