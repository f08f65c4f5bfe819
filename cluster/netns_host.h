// What a netns cluster needs from the machine, behind one interface so that its logic (the exact
// commands, their order, teardown, stale-leftover selection, the self-check's diagnosis) is
// tested with a fake, and the system implementation stays a thin layer:
//   Run           runs iproute2's `ip` (or another tool) to its end: common::RunCommand, with
//                 argv[0] "ip" resolved by IpBinary();
//   ProbeTcp      one TCP round trip into a network namespace: a listener bound to an address in
//                 one namespace, a connect from another, one byte each way. The sockets are made
//                 by a short-lived thread that setns(2)s into the namespace (a socket stays in
//                 the namespace it was made in), so no helper program is needed (a bare Debian
//                 has no ping, nc or socat; iproute2 is all we assume);
//   ProcessAlive  kill(pid, 0) in this process's PID namespace;
//   ReadFile      a small file (/proc/self/status, /proc/sys/net/bridge/...).
#ifndef FALCON_CLUSTER_NETNS_HOST_H_
#define FALCON_CLUSTER_NETNS_HOST_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/cluster_spec.h"
#include "common/run_command.h"

namespace falcon::cluster {

// Where `ip netns add` puts its namespaces (iproute2's NETNS_RUN_DIR).
inline constexpr char kNetnsRunDir[] = "/run/netns";

class NetnsHost {
 public:
  virtual ~NetnsHost() = default;

  // Runs `argv` to its end. Errors only when it could not run or ran past its timeout
  // (common::RunCommand); a failed command is a result with a non-zero exit status.
  virtual absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv) = 0;

  // Listens on `listen_address`:0 inside `listen_netns`, connects from inside `connect_netns`
  // ("" = this process's namespace for either), and sends one byte each way, each step within
  // `timeout`. Errors: kDeadlineExceeded ("connect to 10.77.3.3:41234 from fn1ag-node0 timed out
  // after 5s"), kUnavailable for a refused or unreachable connect, from errno otherwise; the
  // message names the step and both namespaces.
  virtual absl::Status ProbeTcp(const std::string& connect_netns, const std::string& listen_netns,
                                const std::string& listen_address, absl::Duration timeout) = 0;

  virtual bool ProcessAlive(pid_t pid) = 0;

  // The contents of `path` (at most 1 MiB); errors as common::ReadTextFile.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
};

// The machine itself.
std::shared_ptr<NetnsHost> SystemNetnsHost();

// A new TCP/IPv4 socket (blocking, close-on-exec; the caller closes it) of network namespace
// `netns` ("" = this process's): made by a thread that enters /run/netns/NETNS and ends, so the
// calling thread's namespace never changes. For tests and probes that talk into a node without a
// helper program. Errors from errno naming the namespace (kNotFound: no such namespace).
absl::StatusOr<int> TcpSocketIn(const std::string& netns);

// IpBinary(): cluster/cluster_spec.h.

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_NETNS_HOST_H_
