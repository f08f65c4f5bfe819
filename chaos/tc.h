// Bandwidth shaping with tc (iproute2) for the fault driver: the commands a link or NIC fault
// runs, and the clean-up of what they left. This kernel has tbf, htb and u32 but no netem, so
// faults are bandwidth caps, never delay.
//
// Every qdisc the driver adds is the interface's root qdisc with handle fa1c: (kHandle), so that
// `clear` removes exactly those and nothing another tool installed:
//   link (one direction src -> dst), on the sender's interface inside the sender's namespace:
//     tc -n NS qdisc add dev IF root handle fa1c: htb                     (first link on IF)
//     tc -n NS class add dev IF parent fa1c: classid fa1c:SLOT htb rate Rbit ceil Rbit
//        burst B cburst B
//     tc -n NS filter add dev IF parent fa1c: protocol ip prio SLOT u32
//        match ip dst DST_ADDRESS/32 flowid fa1c:SLOT
//   Unclassified traffic (other destinations) passes the htb unshaped (no default class). Removal
//   deletes the filter (by its prio) and the class, or the whole qdisc with the last link on IF.
//   nic, on the node's interface (egress) and on its host-side veth in the root namespace
//   (traffic into the node):
//     tc [-n NS] qdisc add dev IF root handle fa1c: tbf rate Rbit burst B latency 100ms
//   Removal: tc [-n NS] qdisc del dev IF root.
// SLOT is a number in [1, 0xffff] (written in hex in class ids, in decimal as a filter prio).
//
// Errors: kFailedPrecondition "COMMAND: exit N: STDERR" for a tc that failed (e.g. "Error:
// Exclusivity flag on, cannot modify." when IF already has a root qdisc of someone else), or the
// runner's error when tc could not be started.
#ifndef FALCON_CHAOS_TC_H_
#define FALCON_CHAOS_TC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chaos/runner.h"

namespace falcon::chaos {

// An interface inside a network namespace ("" netns: the root namespace).
struct Interface {
  std::string netns;
  std::string dev;

  // "NETNS/DEV", or "DEV" in the root namespace.
  std::string ToString() const;
  friend bool operator<(const Interface& a, const Interface& b) {
    return a.netns != b.netns ? a.netns < b.netns : a.dev < b.dev;
  }
  friend bool operator==(const Interface& a, const Interface& b) {
    return a.netns == b.netns && a.dev == b.dev;
  }
};

class Tc {
 public:
  static constexpr char kHandle[] = "fa1c:";
  static constexpr int kMaxSlot = 0xffff;

  explicit Tc(Runner* runner) : runner_(runner) {}

  // tc argv for `args` on `iface`'s namespace: {"tc", "-n", NETNS, args...} or {"tc", args...}.
  static std::vector<std::string> Argv(const Interface& iface, std::vector<std::string> args);

  // The htb root a link class hangs from.
  absl::Status AddHtbRoot(const Interface& iface);
  // One directed cap: class SLOT at `rate`, and the filter sending traffic for `dst_address`
  // into it.
  absl::Status AddLinkClass(const Interface& iface, int slot, int64_t rate_bit_per_second,
                            int64_t burst_bytes, const std::string& dst_address);
  absl::Status RemoveLinkClass(const Interface& iface, int slot);
  absl::Status AddTbfRoot(const Interface& iface, int64_t rate_bit_per_second, int64_t burst_bytes);
  absl::Status DeleteRoot(const Interface& iface);

  // Whether the root qdisc of `iface` is one of ours (handle fa1c:).
  absl::StatusOr<bool> HasChaosRoot(const Interface& iface);

  // True for a tc error saying the namespace or the device no longer exists (a cluster torn down
  // under the driver): what was on it is gone with it.
  static bool IsGone(const absl::Status& status);
  // True for a qdisc deletion that found no qdisc to delete.
  static bool IsNoQdisc(const absl::Status& status);

  // Runs tc with `args` on `iface` (Argv); kFailedPrecondition on a non-zero exit.
  absl::StatusOr<CommandResult> Run(const Interface& iface, std::vector<std::string> args);

 private:
  Runner* runner_;
};

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_TC_H_
