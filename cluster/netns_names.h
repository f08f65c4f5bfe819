// The names of what a NetnsCluster creates, and how leftovers are recognised by name alone.
//
//   prefix     "fn" + the creator's pid in lowercase hex + one counter letter in [g-z]
//              (a per-process count of clusters; not a hex digit, so the pid ends
//              unambiguously): "fn3a7fg" for pid 0x3a7f's first cluster.
//   bridge     prefix + "br"                   "fn3a7fgbr"      (root namespace)
//   host veth  prefix + "h" + node index      "fn3a7fgh0"      (root namespace, on the bridge)
//   netns      prefix + "-" + node name       "fn3a7fg-node0"  (/run/netns/<name>)
// A pid has at most 8 hex digits and a cluster at most kMaxNetnsNodes nodes, so a link name has at
// most 2 + 8 + 1 + 1 + 3 = 15 bytes: it fits IFNAMSIZ (16 with the NUL).
//
// Everything that parses as one of these is Falcon's; nothing else ever is (CleanupStale).
#ifndef FALCON_CLUSTER_NETNS_NAMES_H_
#define FALCON_CLUSTER_NETNS_NAMES_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace falcon::cluster {

// Longest interface name Linux accepts (IFNAMSIZ - 1).
inline constexpr size_t kMaxLinkNameBytes = 15;
// Node addresses are x.y.z.1 .. x.y.z.253 of the cluster's /24; .254 is the controller address.
inline constexpr int kMaxNetnsNodes = 253;
// Letters a prefix's counter takes ([g-z]): clusters one process can hold at once.
inline constexpr int kPrefixCounterLetters = 20;
// Longest node name accepted in a namespace name.
inline constexpr size_t kMaxNetnsNodeNameBytes = 64;

// "fn" + hex(pid) + letter('g' + counter). pid > 0, counter in [0, kPrefixCounterLetters).
std::string NetnsPrefix(pid_t pid, int counter);
std::string BridgeName(absl::string_view prefix);
std::string HostVethName(absl::string_view prefix, int node_index);
std::string NetnsName(absl::string_view prefix, absl::string_view node);

// What a name of the pattern above says.
struct FalconNetName {
  enum class Kind { kBridge, kHostVeth, kNetns };
  Kind kind;
  std::string prefix;  // "fn3a7fg"
  pid_t pid = 0;       // The creator's pid (as its PID namespace saw it).
};

// A link name (bridge or host veth) of the pattern; nullopt for anything else.
std::optional<FalconNetName> ParseLinkName(absl::string_view name);
// A namespace name of the pattern; nullopt for anything else.
std::optional<FalconNetName> ParseNetnsName(absl::string_view name);

// The creator pid of a whole prefix ("fn3a7fg" -> 0x3a7f); nullopt when `prefix` is not one.
std::optional<pid_t> PrefixCreatorPid(absl::string_view prefix);

// A node name usable in a namespace name: 1 to kMaxNetnsNodeNameBytes bytes of [A-Za-z0-9._-],
// not "." or "..". kInvalidArgument "FIELD: 'x/y' ..." otherwise.
absl::Status ValidateNetnsNodeName(absl::string_view name, absl::string_view field);

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_NETNS_NAMES_H_
