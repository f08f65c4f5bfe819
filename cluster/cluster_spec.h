// The description of a running Falcon test cluster that its parts share: the harness that made
// the nodes writes a ClusterSpec (cluster.json), the rank launcher writes a RankTable
// (ranks.json) each time it (re)starts the ranks, and the fault driver (chaos/) reads both to find
// the interface of a link or the process of a rank. One format, one parser.
//
// cluster.json:
//   {"kind": "netns", "prefix": "fn3a7f", "bridge": "fn3a7fbr", "subnet": "10.77.3.0/24",
//    "controller_address": "10.77.3.254",
//    "nodes": [{"name": "node0", "netns": "fn3a7f-node0", "address": "10.77.3.1",
//               "iface": "eth0", "host_veth": "fn3a7fh0"}, ...]}
//   kind "loopback": every node's address is 127.0.0.1 and netns, iface, host_veth, bridge,
//   subnet are empty (nothing to shape; the fault driver refuses link faults there).
// ranks.json:
//   {"generation": 0, "ranks": [{"rank": 0, "node": "node0", "pid": 4242}, ...]}
//   generation counts launches of the job's ranks (0 first, +1 per S4 restart); rank numbers are
//   those of that launch.
//
// Errors: kInvalidArgument naming the source and the field ("cluster.json: nodes[2].address:
// '10.1.2' is not an IPv4 address"), for malformed JSON, a missing or mistyped field, a
// duplicate node name or rank, a rank naming a node the spec lacks (CheckRankTable) or pid <= 0;
// file errors as common/text_file.h; writes are atomic (temporary file + rename), kInternal with
// strerror when they fail.
#ifndef FALCON_CLUSTER_CLUSTER_SPEC_H_
#define FALCON_CLUSTER_CLUSTER_SPEC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::cluster {

enum class ClusterKind { kNetns, kLoopback };

// "netns" / "loopback".
absl::string_view ClusterKindName(ClusterKind kind);

struct NodeSpec {
  std::string name;       // Emulated node name: the ranks' FALCON_NODE, the agent's --node.
  std::string netns;      // Network namespace the node's processes run in; "" on loopback.
  std::string address;    // IPv4 address of the node's interface (127.0.0.1 on loopback).
  std::string iface;      // The node's interface inside its namespace ("eth0"); "" on loopback.
  std::string host_veth;  // The other end of the node's veth, on the bridge in the root
                          // namespace (traffic *to* the node leaves through it); "" on loopback.
};

struct ClusterSpec {
  ClusterKind kind = ClusterKind::kLoopback;
  std::string prefix;              // Name prefix of everything the harness created.
  std::string bridge;              // Bridge in the root namespace joining the nodes.
  std::string subnet;              // CIDR of the node addresses, e.g. "10.77.3.0/24".
  std::string controller_address;  // Where the nodes reach the root namespace (the bridge's
                                   // address; 127.0.0.1 on loopback).
  std::vector<NodeSpec> nodes;

  // The node called `name`; kNotFound naming it and the nodes there are.
  absl::StatusOr<const NodeSpec*> Node(absl::string_view name) const;
  // The node whose address is `address`; kNotFound.
  absl::StatusOr<const NodeSpec*> NodeByAddress(absl::string_view address) const;
};

struct RankEntry {
  int rank = 0;
  std::string node;  // NodeSpec::name.
  pid_t pid = 0;     // The rank process (its threads and children share its cgroup).
};

struct RankTable {
  int64_t generation = 0;
  std::vector<RankEntry> ranks;  // Sorted by rank.

  // The entry of `rank`; kNotFound naming the rank and the world size.
  absl::StatusOr<const RankEntry*> Rank(int rank) const;
};

absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view json, absl::string_view source);
std::string ClusterSpecToJson(const ClusterSpec& spec);  // One line, no trailing newline.
absl::StatusOr<ClusterSpec> ReadClusterSpec(const std::string& path);
absl::Status WriteClusterSpec(const std::string& path, const ClusterSpec& spec);

absl::StatusOr<RankTable> ParseRankTable(absl::string_view json, absl::string_view source);
std::string RankTableToJson(const RankTable& table);  // One line, no trailing newline.
absl::StatusOr<RankTable> ReadRankTable(const std::string& path);
absl::Status WriteRankTable(const std::string& path, const RankTable& table);

// kInvalidArgument naming the first rank whose node is not in `spec`.
absl::Status CheckRankTable(const ClusterSpec& spec, const RankTable& table);

// The path of iproute2's `ip`: the first executable "ip" in $PATH, /usr/sbin or /sbin (a non-root
// PATH, or a test's, often lacks the sbin directories); "ip" when none is found.
std::string IpBinary();

// The command line that runs `argv` as a process of `node`: inside its network namespace through
// iproute2 (`IpBinary() netns exec NETNS ARGV...`, which enters the namespace and execs ARGV in the
// same process, so its pid, PR_SET_PDEATHSIG and signals are those of the program), or `argv`
// itself for a node without a namespace (loopback).
std::vector<std::string> CommandInNode(const NodeSpec& node, std::vector<std::string> argv);

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_CLUSTER_SPEC_H_
