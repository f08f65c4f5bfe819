// falcon_launch: starts the N rank processes of a job on this machine, grouped into K emulated
// nodes, with the FALCON_* environment of launch/rank_env.h and a fresh rendezvous directory;
// forwards SIGINT/SIGTERM to every rank; and when one rank fails, stops all others and reports
// that rank.
//
// Exit status of RunLaunch (what the binary exits with):
//   0        every rank exited 0;
//   c        the first failing rank exited with code c != 0;
//   128 + s  the first failing rank was killed by signal s, or the launcher itself got signal s
//            (SIGINT/SIGTERM), forwarded it, and the ranks stopped.
// A rank whose program cannot be executed (or whose process cannot be started) is a failing rank
// with code 127: the launcher prints
// "falcon_launch: rank R (NODE): cannot execute 'PROGRAM': REASON; stopping N other ranks", starts
// no further rank and stops those it started.
// Ranks that the launcher stops are not failures. Each rank runs in its own process group (its
// children are signalled with it). If the launcher dies, even by SIGKILL, every rank is SIGKILLed
// (PR_SET_PDEATHSIG, armed in the child after fork and checked against the launcher's pid), and so
// is every process group of a rank still running, which takes what the ranks started themselves:
// a small guard process forked by the launcher (own process group, no exec) does that when its
// socket to the launcher closes, then exits. Ranks and the guard are common::Subprocess children
// (common/subprocess.h): a rank is a Spawn, the guard a SpawnFunction.
#ifndef FALCON_COLLECTIVE_LAUNCH_LAUNCHER_H_
#define FALCON_COLLECTIVE_LAUNCH_LAUNCHER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/cluster_spec.h"
#include "collective/launch/rank_env.h"

namespace falcon::collective::launch {

struct LaunchOptions {
  int nproc = 0;                 // Ranks, > 0.
  int dp = 0;                    // Data-parallel size; 0: nproc / (pp * tp).
  int pp = 1;                    // Pipeline-parallel size, >= 1.
  int tp = 1;                    // Tensor-parallel size, >= 1.
  int nodes = 1;                 // Emulated nodes; must divide nproc. Ranks fill nodes in order.
  std::string backend = "gloo";  // FALCON_BACKEND.
  std::string faults;            // FALCON_FAULTS (spec or @file).
  absl::Duration comm_timeout = absl::Seconds(60);  // FALCON_COMM_TIMEOUT_MS; (0, 10 min].
  bool pin_cpus = false;  // Pin rank r to the r-th allowed CPU (mod count), for contention.
  absl::Duration grace = absl::Seconds(5);  // SIGTERM -> SIGKILL when stopping ranks; [0, 10 min].
  std::string rendezvous_root;              // Parent of the fresh store dir; "" = $TMPDIR or /tmp.
  bool keep_rendezvous = false;             // Leave the store dir behind (debugging).
  std::vector<std::string> command;         // PROGRAM ARGS...; non-empty.
  // The node of each rank (nproc names) when not the default fill-in-order node0..node{K-1} (an
  // S4 restart keeps every survivor on its node); `nodes` must be the number of distinct names.
  // Empty: the default.
  std::vector<std::string> rank_nodes;
  // The cluster the nodes belong to (cluster/cluster_spec.h). Set: every rank's node must be one
  // of its nodes; a rank runs as a process of its node (inside the node's network namespace:
  // cluster::CommandInNode) with FALCON_HOST_ADDRESS = the node's address. Unset: every rank on
  // this host's loopback.
  std::optional<cluster::ClusterSpec> cluster;
  // Where to write the rank table (cluster::RankTable: rank, node, pid) once every rank has
  // started, atomically, for tools outside the job (the fault driver). Empty: not written.
  std::string rank_table_path;
  int64_t generation = 0;  // The rank table's generation (launches of the job before this one).
};

// kInvalidArgument naming the flag: rank_nodes of the wrong size or with a count of distinct
// names other than nodes, a rank whose node the cluster lacks (naming both), nproc <= 0, sizes < 1,
// dp*pp*tp != nproc, nodes not dividing nproc, unknown backend, empty command, comm_timeout outside
// (0, 10 min] or grace outside [0, 10 min] (--comm_timeout_ms, --grace_ms); --faults that does not
// parse (an @file that cannot be read included) or names a rank (compute/contention rank, link src
// or dst) outside [0, nproc), naming the fault and the rank.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// Each rank's environment (index = global rank) for a job using `rendezvous_dir`.
absl::StatusOr<std::vector<RankEnv>> PlanRanks(const LaunchOptions& options,
                                               const std::string& rendezvous_dir);

struct LaunchResult {
  int exit_code = 0;     // See the header comment.
  int failed_rank = -1;  // First failing rank, -1 if none.
  std::string summary;   // One line for humans, e.g. "rank 3 (node1, pid 42) exited with code 3".
};

// Runs the job to completion (blocks SIGINT/SIGTERM/SIGCHLD in the calling thread and reads them
// through a signalfd; call from the main thread of a single-threaded process). Progress and the
// summary go to stderr. Errors: options (kInvalidArgument), store dir or signalfd failures
// (kInternal); rank failures, a rank that cannot be started included, are results, not errors.
absl::StatusOr<LaunchResult> RunLaunch(const LaunchOptions& options);

}  // namespace falcon::collective::launch

#endif  // FALCON_COLLECTIVE_LAUNCH_LAUNCHER_H_
