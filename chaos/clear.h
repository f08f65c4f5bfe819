// `falcon_chaos clear`: removes what fault drivers left on a cluster after a game day went wrong
// (a driver killed with SIGKILL cannot clean up). Idempotent; touches only what carries the
// driver's marks:
//   - a root qdisc with handle fa1c: (tc.h) on a node's interface in its namespace or on its
//     host-side veth: deleted (tc qdisc del ... root);
//   - a cgroup named falcon-chaos.TAG.PID.ID (cgroup.h) whose TAG is this cluster's, or whose
//     driver PID is gone: its processes move to the root cgroup (where they came from is not
//     known any more), then it is removed.
// A namespace or interface that no longer exists, or a machine without a cgroup cpu controller,
// is reported as a note, not an error. stress-ng processes die with their driver
// (PR_SET_PDEATHSIG) and need no clean-up.
#ifndef FALCON_CHAOS_CLEAR_H_
#define FALCON_CHAOS_CLEAR_H_

#include <string>
#include <vector>

#include "chaos/runner.h"
#include "cluster/cluster_spec.h"

namespace falcon::chaos {

struct ClearReport {
  std::vector<std::string> removed;  // "qdisc fa1c: on fn3a7f-node0/eth0", "cgroup PATH".
  std::vector<std::string> notes;    // What could not be looked at, and why.
  // tc or cgroup operations that failed on something that exists, naming it (with tc's stderr);
  // everything else was still tried.
  std::vector<std::string> errors;
};

ClearReport ClearCluster(const cluster::ClusterSpec& cluster, Runner* runner,
                         const std::string& sys_fs_cgroup = "/sys/fs/cgroup");

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_CLEAR_H_
