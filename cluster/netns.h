// falcon::cluster::NetnsCluster: emulated nodes that are real network hosts on this machine, each
// in a network namespace of its own, joined by a Linux bridge, made and removed with iproute2's
// `ip` (no netlink code of Falcon's own). Create() makes, in the creator's network namespace
// (the "root namespace" below):
//   - a bridge <prefix>br with the controller address x.y.z.254/24 (ClusterSpec::
//     controller_address: a controller in the root namespace listening there, or on 0.0.0.0, is
//     reached by every node), up;
//   - per node i: a network namespace <prefix>-<node>, a veth pair whose end "eth0" is inside it
//     with address x.y.z.(i+1)/24, and whose other end <prefix>h<i> (NodeSpec::host_veth; traffic
//     to the node leaves the bridge through it) is on the bridge; both ends and the node's lo up,
//     and a default route via x.y.z.254. The bridge and the veths get no IPv6 addresses
//     (addrgenmode none), so no IPv6 neighbour discovery runs on them;
//   - then a self-check: a TCP round trip from each node to the controller address and to the
//     next node (i -> i+1 mod K). When it fails, the error names the node and lists what may drop
//     the traffic, from this machine's settings: with br_netfilter loaded and
//     net.bridge.bridge-nf-call-iptables=1, traffic between nodes passes the root namespace's
//     iptables FORWARD chain (a DROP policy, as Docker sets, loses it; the message gives the
//     ACCEPT rule and the sysctl that turn this off); node -> controller passes the INPUT chain;
//     a qdisc on a host veth may drop either. Forwarding (net.ipv4.ip_forward) is not needed:
//     node traffic is bridged, and the controller address is local.
// Names (cluster/netns_names.h) start with a prefix "fn<creator pid hex><letter>", so that
// creators in parallel never collide and leftovers are recognised. The /24 is the first of
// 10.77.0.0 .. 10.99.255.0 that no address or route of the root namespace touches
// (cluster/netns_subnet.h), chosen under an flock on LOCK_DIR/subnet.lock held until the bridge has
// its address, so concurrent creators never pick the same. The creator also holds an flock on
// LOCK_DIR/<prefix>.lock for the cluster's life: the kernel drops it when the creator dies, which
// is how CleanupStaleNetns() tells a leftover from a live cluster even across PID namespaces.
//
// Needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (ip netns add mounts), in the host's user
// namespace: CheckNetnsSupport() says plainly what is missing. Under Bazel, a test that creates
// namespaces needs tags = ["no-sandbox"]: linux-sandbox runs tests in a user namespace of their
// own (no capability over the host's network: `ip link add` fails EPERM), a read-only /run (`ip
// netns add` cannot create /run/netns/NAME) and a PID namespace of their own.
//
// Running programs in a node: CommandInNode() (cluster_spec.h) prefixes `ip netns exec NS`.
// iproute2 execs the program (checked by netns_real_test: the pid a Subprocess reports becomes the
// program's, a direct child of the spawner, inside the node's namespace), so PR_SET_PDEATHSIG set
// before the exec survives and signals reach the program itself. The program also gets a mount
// namespace of its own in which /sys shows the node's interfaces (so /sys/class/net there is the
// node's; the host_veth counters are read in the root namespace).
//
// Errors (absl::Status): kInvalidArgument for bad options (naming the field); kFailedPrecondition
// when namespaces cannot be created here (CheckNetnsSupport's sentence) or the self-check fails;
// kInternal "node2: `ip -n fn1ag-node2 addr add 10.77.0.3/24 dev eth0` exited with code 2:
// RTNETLINK answers: File exists" for a failed command (the node or "bridge", the command line,
// its stderr); kResourceExhausted when no /24 or no prefix letter is free. Create() tears down what
// it made before returning an error.
//
// Thread-compatible: one thread drives a cluster.
#ifndef FALCON_CLUSTER_NETNS_H_
#define FALCON_CLUSTER_NETNS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/cluster_spec.h"
#include "cluster/file_lock.h"
#include "cluster/netns_host.h"
#include "common/error_counter.h"

namespace falcon::cluster {

// Where the subnet lock and the per-cluster lock files live.
inline constexpr char kDefaultNetnsLockDir[] = "/run/lock/falcon-netns";

// "node0", ..., "node{n-1}".
std::vector<std::string> DefaultNodeNames(int n);

struct NetnsOptions {
  // The nodes, in order (node i gets address .(i+1) and host veth <prefix>h<i>): 1 to
  // kMaxNetnsNodes distinct names of [A-Za-z0-9._-] (ValidateNetnsNodeName).
  std::vector<std::string> nodes = DefaultNodeNames(4);
  // The machine; nullptr: SystemNetnsHost(). Tests pass a fake.
  std::shared_ptr<NetnsHost> host;
  // Lock files (created 0755 when missing). Every creator and cleaner on a machine must use the
  // same directory.
  std::string lock_dir = kDefaultNetnsLockDir;
  // Run the self-check after creating.
  bool self_check = true;
  // Bound of each step of a self-check probe (connect, accept, one byte each way): a failure
  // bound, not an expectation; a healthy probe takes well under a millisecond.
  absl::Duration probe_timeout = absl::Seconds(5);
  // Counts teardown errors (where "netns_destroy"); nullptr: only logged and counted in
  // NetnsCluster::teardown_errors().
  common::ErrorCounter* errors = nullptr;
};

class NetnsCluster {
 public:
  static absl::StatusOr<std::unique_ptr<NetnsCluster>> Create(const NetnsOptions& options);
  ~NetnsCluster();  // Destroy(), unless detached.
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  // kind kNetns, prefix, bridge, subnet, controller_address, nodes (name, netns, address, iface
  // "eth0", host_veth).
  const ClusterSpec& spec() const { return spec_; }
  absl::Status WriteSpec(const std::string& path) const { return WriteClusterSpec(path, spec_); }

  // Removes every link and namespace it created (host veths, which takes the node ends along, then
  // the namespaces, then the bridge) and its lock file; idempotent. Each failure is logged
  // (WARNING, naming the object and the command's stderr) and counted; the first is returned.
  absl::Status Destroy();
  // Teardown failures so far.
  int teardown_errors() const { return teardown_errors_; }

  // Leaves the cluster in place for DestroyNetnsCluster (`falcon_netns destroy --spec`): marks its
  // lock file "detached" (CleanupStale leaves detached clusters alone) and releases it; the
  // destructor then removes nothing. Errors when the mark cannot be written (the cluster stays
  // owned).
  absl::Status Detach();

 private:
  NetnsCluster(NetnsOptions options, std::shared_ptr<NetnsHost> host)
      : options_(std::move(options)), host_(std::move(host)) {}
  absl::Status Build();

  NetnsOptions options_;
  std::shared_ptr<NetnsHost> host_;
  ClusterSpec spec_;
  std::optional<FileLock> lock_;  // LOCK_DIR/<prefix>.lock while owned.
  // What exists now, for teardown (filled as Build() makes it).
  bool bridge_made_ = false;
  std::vector<std::string> netns_made_;
  std::vector<std::string> veths_made_;
  int teardown_errors_ = 0;
};

// OK when this process can create network namespaces and links here; it tries (a namespace and a
// bridge of a fresh prefix, removed at once). kFailedPrecondition otherwise, one plain sentence:
// "creating network namespaces needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN; this process has
// uid 1000 without CAP_NET_ADMIN, CAP_SYS_ADMIN; use the loopback cluster" (or: no `ip` binary;
// or the failed command's stderr, with a note when the process is in a user namespace of its
// own, as in Bazel's sandbox).
absl::Status CheckNetnsSupport(std::shared_ptr<NetnsHost> host = nullptr,
                               const std::string& lock_dir = kDefaultNetnsLockDir);

// What CleanupStale did, per prefix found.
struct NetnsCleanupReport {
  std::vector<std::string> removed;  // Links and namespaces removed.
  std::vector<std::string> kept;     // "fn1ag: creator pid 26 lives", "... detached", ...
  int errors = 0;                    // Removals that failed (logged and counted).
};

// Removes the leftovers of netns clusters whose creator is gone: links and namespaces whose names
// parse as Falcon's (cluster/netns_names.h), grouped by prefix, when the creator pid is not alive
// in this PID namespace AND its lock file is not held (missing, or lockable) AND not marked
// detached. Never touches a name outside the pattern, a live creator's, or a detached cluster's.
// Errors: a listing command that fails (nothing is removed then); removal failures are counted in
// the report.
absl::StatusOr<NetnsCleanupReport> CleanupStaleNetns(
    std::shared_ptr<NetnsHost> host = nullptr, const std::string& lock_dir = kDefaultNetnsLockDir,
    common::ErrorCounter* errors = nullptr);

// Removes the cluster `spec` describes (a detached one): its host veths, namespaces and bridge
// that exist, and its lock file. kInvalidArgument when the spec is not a netns spec or names
// something outside its prefix's pattern; kFailedPrecondition when its lock is held (its creator
// runs: stop that instead). Removal failures: logged, counted, the first returned.
absl::Status DestroyNetnsCluster(const ClusterSpec& spec, std::shared_ptr<NetnsHost> host = nullptr,
                                 const std::string& lock_dir = kDefaultNetnsLockDir,
                                 common::ErrorCounter* errors = nullptr);

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_NETNS_H_
