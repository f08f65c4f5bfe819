// A NetnsHost for tests: records every command, keeps the links and namespaces that `ip` commands
// would make or remove, answers `ip -j` listings from them, and fails or probes as told. No
// process is started and nothing on the machine changes.
#ifndef FALCON_CLUSTER_FAKE_NETNS_HOST_H_
#define FALCON_CLUSTER_FAKE_NETNS_HOST_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/netns_host.h"

namespace falcon::cluster {

class FakeNetnsHost : public NetnsHost {
 public:
  struct Probe {
    std::string connect_netns;
    std::string listen_netns;
    std::string listen_address;
  };

  // State the commands act on. Links of the root namespace (by name) and namespaces.
  std::set<std::string> links = {"lo", "eth0"};
  std::set<std::string> netns;
  // Printed by `ip -j -4 addr show` (followed by the addresses `ip addr add` gave links of the
  // root namespace) / `ip -j -4 route show table all`.
  std::string addr_json =
      R"([{"ifname":"eth0","addr_info":[{"local":"192.0.2.2","prefixlen":24}]}])";
  std::string route_json = R"([{"dst":"default"},{"dst":"192.0.2.0/24"}])";
  // Root-namespace addresses added by `ip addr add CIDR dev LINK`: link -> CIDR.
  std::map<std::string, std::string> added_addrs;
  // A command whose line contains this fails with exit code 2 and `fail_stderr`.
  std::string fail_on;
  std::string fail_stderr = "RTNETLINK answers: File exists";
  // Programs that are "not installed" (Run returns kNotFound).
  std::set<std::string> missing_programs = {"iptables"};
  // ProbeTcp fails (kDeadlineExceeded) for the probes this returns true for; unset: none fails.
  std::function<bool(const Probe&)> fail_probe;
  // Stdout of other commands, by command line (absent: empty output, exit 0).
  std::map<std::string, std::string> outputs;
  std::set<pid_t> alive;
  std::map<std::string, std::string> files;

  // Every command run, as common::CommandLine shows it, and every probe.
  std::vector<std::string> commands;
  std::vector<Probe> probes;

  // The commands run since the last call (and forgets them).
  std::vector<std::string> TakeCommands();

  absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv) override;
  absl::Status ProbeTcp(const std::string& connect_netns, const std::string& listen_netns,
                        const std::string& listen_address, absl::Duration timeout) override;
  bool ProcessAlive(pid_t pid) override { return alive.count(pid) > 0; }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
};

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_FAKE_NETNS_HOST_H_
