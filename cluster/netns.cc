#include "cluster/netns.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cluster/netns_names.h"
#include "cluster/netns_subnet.h"
#include "common/json_parse.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace falcon::cluster {
namespace {

using nlohmann::json;

constexpr char kIface[] = "eth0";
constexpr char kDetachedMark[] = "detached\n";
constexpr absl::string_view kUseLoopback = "; use the loopback cluster";
constexpr absl::string_view kNeeds =
    "creating network namespaces needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN";
constexpr int kCapNetAdmin = 12;
constexpr int kCapSysAdmin = 21;

// Runs `argv`; OK when it exits 0, else kInternal "WHO: `ARGV` exited with code N: STDERR".
absl::Status RunIp(NetnsHost& host, absl::string_view who, const std::vector<std::string>& argv) {
  absl::StatusOr<common::CommandResult> r = host.Run(argv);
  absl::Status s = !r.ok()               ? r.status()
                   : r->status.success() ? absl::OkStatus()
                                         : common::CommandFailure(argv, *r);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
}

// The stdout of `argv` parsed as JSON (an empty output is []).
absl::StatusOr<json> RunJson(NetnsHost& host, const std::vector<std::string>& argv) {
  absl::StatusOr<common::CommandResult> r = host.Run(argv);
  if (!r.ok()) return r.status();
  if (!r->status.success()) return common::CommandFailure(argv, *r);
  const std::string source = absl::StrCat("`", common::CommandLine(argv), "`");
  absl::StatusOr<json> parsed = common::ParseJson(
      absl::StripAsciiWhitespace(r->stdout_text).empty() ? "[]" : r->stdout_text, source);
  if (parsed.ok() && !parsed->is_array()) {
    return absl::InternalError(absl::StrCat(source, ": output is not a JSON array"));
  }
  return parsed;
}

// The values of `key` in the objects of `ip -j ...`'s array output.
absl::StatusOr<std::vector<std::string>> ListNames(NetnsHost& host,
                                                   const std::vector<std::string>& argv,
                                                   const char* key) {
  absl::StatusOr<json> list = RunJson(host, argv);
  if (!list.ok()) return list.status();
  std::vector<std::string> names;
  for (const json& entry : *list) {
    auto it = entry.find(key);
    if (it != entry.end() && it->is_string()) names.push_back(it->get<std::string>());
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> ListLinks(NetnsHost& host) {
  return ListNames(host, {"ip", "-j", "link", "show"}, "ifname");
}

absl::StatusOr<std::vector<std::string>> ListNetns(NetnsHost& host) {
  return ListNames(host, {"ip", "-j", "netns", "list"}, "name");
}

std::string LockPath(const std::string& lock_dir, absl::string_view prefix) {
  return absl::StrCat(lock_dir, "/", prefix, ".lock");
}

absl::Status MakeLockDir(const std::string& lock_dir) {
  if (mkdir(lock_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create lock directory ", lock_dir));
  }
  return absl::OkStatus();
}

// The objects of one cluster, in creation order.
struct Objects {
  std::vector<std::string> veths;
  std::vector<std::string> netns;
  std::string bridge;  // "" : none.
};

// Removes `objects` that exist (host veths first: deleting one end removes the pair; then the
// namespaces; then the bridge). Each failure is logged, counted in `failures` and `counter`, and
// the first returned. Names removed go to `removed` when given.
absl::Status RemoveObjects(NetnsHost& host, const Objects& objects, absl::string_view prefix,
                           common::ErrorCounter* counter, int* failures,
                           std::vector<std::string>* removed) {
  absl::Status first;
  auto fail = [&](absl::Status s) {
    LOG(WARNING) << "netns teardown failed prefix=" << prefix << " error=" << s.message();
    ++*failures;
    if (counter != nullptr) counter->CountError("netns_destroy");
    if (first.ok()) first = std::move(s);
  };
  // What exists now: a half-made cluster, or one partly removed by hand, has less.
  std::set<std::string> links;
  std::set<std::string> spaces;
  const bool need_links = !objects.veths.empty() || !objects.bridge.empty();
  absl::StatusOr<std::vector<std::string>> listed_links =
      need_links ? ListLinks(host) : std::vector<std::string>();
  absl::StatusOr<std::vector<std::string>> listed_netns =
      objects.netns.empty() ? std::vector<std::string>() : ListNetns(host);
  if (!listed_links.ok()) fail(listed_links.status());
  if (!listed_netns.ok()) fail(listed_netns.status());
  if (listed_links.ok()) links.insert(listed_links->begin(), listed_links->end());
  if (listed_netns.ok()) spaces.insert(listed_netns->begin(), listed_netns->end());
  // Unknown (listing failed): try every object.
  auto exists = [](const absl::StatusOr<std::vector<std::string>>& listed,
                   const std::set<std::string>& set,
                   const std::string& name) { return !listed.ok() || set.count(name) > 0; };
  auto remove = [&](const std::string& name, std::vector<std::string> argv) {
    absl::Status s = RunIp(host, name, argv);
    if (!s.ok()) {
      fail(std::move(s));
    } else if (removed != nullptr) {
      removed->push_back(name);
    }
  };
  for (auto it = objects.veths.rbegin(); it != objects.veths.rend(); ++it) {
    if (exists(listed_links, links, *it)) remove(*it, {"ip", "link", "del", *it});
  }
  for (auto it = objects.netns.rbegin(); it != objects.netns.rend(); ++it) {
    if (exists(listed_netns, spaces, *it)) remove(*it, {"ip", "netns", "del", *it});
  }
  if (!objects.bridge.empty() && exists(listed_links, links, objects.bridge)) {
    remove(objects.bridge, {"ip", "link", "del", objects.bridge});
  }
  return first;
}

// A fresh prefix of this process (no link or namespace of that prefix exists, its lock file is
// free), with its lock held and marked with our pid.
absl::StatusOr<std::pair<std::string, FileLock>> AllocatePrefix(NetnsHost& host,
                                                                const std::string& lock_dir) {
  static std::atomic<int> next_counter{0};
  absl::StatusOr<std::vector<std::string>> links = ListLinks(host);
  if (!links.ok()) return links.status();
  absl::StatusOr<std::vector<std::string>> spaces = ListNetns(host);
  if (!spaces.ok()) return spaces.status();
  std::set<std::string> taken;
  for (const std::string& l : *links) {
    if (auto n = ParseLinkName(l)) taken.insert(n->prefix);
  }
  for (const std::string& s : *spaces) {
    if (auto n = ParseNetnsName(s)) taken.insert(n->prefix);
  }
  const pid_t pid = getpid();
  for (int tries = 0; tries < kPrefixCounterLetters; ++tries) {
    const std::string prefix = NetnsPrefix(pid, next_counter.fetch_add(1) % kPrefixCounterLetters);
    if (taken.count(prefix) > 0) continue;
    absl::StatusOr<FileLock> lock = FileLock::TryAcquire(LockPath(lock_dir, prefix));
    if (absl::IsUnavailable(lock.status())) continue;
    if (!lock.ok()) return lock.status();
    if (absl::Status s = lock->Write(absl::StrCat("pid=", pid, "\n")); !s.ok()) return s;
    return std::make_pair(prefix, *std::move(lock));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("no free netns prefix for pid ", pid, ": all ", kPrefixCounterLetters,
                   " letters are in use by clusters of this process or leftovers (run "
                   "`falcon_netns cleanup`)"));
}

// "1" / "0" / "?" for a /proc/sys flag.
std::string ProcFlag(NetnsHost& host, const std::string& path) {
  absl::StatusOr<std::string> v = host.ReadFile(path);
  return v.ok() ? std::string(absl::StripAsciiWhitespace(*v)) : std::string("?");
}

// What may drop traffic from node `from` to `to` (nullptr: the controller address), from this
// machine's settings: the bridge netfilter hook and iptables (with the chain's rules when iptables
// is installed), and shaping on the host veths.
std::string DiagnoseDrop(NetnsHost& host, const ClusterSpec& spec, const NodeSpec& from,
                         const NodeSpec* to) {
  const std::string call_iptables = ProcFlag(host, "/proc/sys/net/bridge/bridge-nf-call-iptables");
  absl::StatusOr<std::string> tables = host.ReadFile("/proc/net/ip_tables_names");
  std::vector<std::string> table_names;
  if (tables.ok()) {
    table_names = absl::StrSplit(*tables, absl::ByAnyChar("\n "), absl::SkipWhitespace());
  }
  const std::string loaded =
      table_names.empty()
          ? " (no iptables table is loaded: look at nftables, `nft list ruleset`)"
          : absl::StrCat(" (iptables tables loaded: ", absl::StrJoin(table_names, ", "), ")");
  const std::string chain = to != nullptr ? "FORWARD" : "INPUT";
  std::string out;
  if (to != nullptr && call_iptables == "1") {
    absl::StrAppend(&out,
                    "br_netfilter is loaded and net.bridge.bridge-nf-call-iptables=1: frames "
                    "bridged between the nodes pass the iptables FORWARD chain of the root "
                    "namespace",
                    loaded,
                    "; if its policy or rules drop them (Docker sets policy DROP), allow the "
                    "bridge with `iptables -I FORWARD -i ",
                    spec.bridge, " -o ", spec.bridge,
                    " -j ACCEPT` or turn the hook off with `sysctl -w "
                    "net.bridge.bridge-nf-call-iptables=0`");
  } else if (to != nullptr) {
    absl::StrAppend(&out, "net.bridge.bridge-nf-call-iptables=", call_iptables,
                    ": bridged frames do not pass iptables; look at nftables bridge rules (`nft "
                    "list ruleset`) and the bridge's ports (`ip link show master ",
                    spec.bridge, "`)");
  } else {
    absl::StrAppend(&out, "traffic to the controller address is local delivery on ", spec.bridge,
                    loaded,
                    "; if a firewall of the root namespace drops it (iptables/nftables INPUT), "
                    "allow it with `iptables -I INPUT -i ",
                    spec.bridge, " -j ACCEPT`");
  }
  // Shaping: replies to `from` leave the bridge through its host veth, requests to `to` through
  // that node's.
  absl::StrAppend(
      &out, "; a qdisc on a host veth can drop it too (`tc qdisc show dev ", from.host_veth, "`",
      to != nullptr ? absl::StrCat(", `tc qdisc show dev ", to->host_veth, "`") : "", ")");
  absl::StatusOr<common::CommandResult> rules = host.Run({"iptables", "-S", chain});
  if (rules.ok() && rules->status.success()) {
    std::vector<std::string> lines =
        absl::StrSplit(absl::StripAsciiWhitespace(rules->stdout_text), '\n');
    absl::StrAppend(&out, "; `iptables -S ", chain, "`: ", absl::StrJoin(lines, " | "));
  }
  return out;
}

absl::Status ValidateOptions(const NetnsOptions& o) {
  if (o.nodes.empty() || static_cast<int>(o.nodes.size()) > kMaxNetnsNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.nodes: ", o.nodes.size(), " nodes; a netns cluster has 1 to ", kMaxNetnsNodes));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < o.nodes.size(); ++i) {
    const std::string field = absl::StrCat("options.nodes[", i, "]");
    if (absl::Status s = ValidateNetnsNodeName(o.nodes[i], field); !s.ok()) return s;
    if (!seen.insert(o.nodes[i]).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": '", o.nodes[i], "' twice"));
    }
  }
  if (o.lock_dir.empty()) return absl::InvalidArgumentError("options.lock_dir: empty");
  if (o.probe_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.probe_timeout: must be positive");
  }
  return absl::OkStatus();
}

// Capability bits of CapEff in /proc/self/status; nullopt when unreadable.
std::optional<uint64_t> EffectiveCaps(const std::string& status) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (absl::ConsumePrefix(&line, "CapEff:")) {
      uint64_t caps = 0;
      if (absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &caps)) return caps;
    }
  }
  return std::nullopt;
}

std::string StatusField(const std::string& status, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (absl::ConsumePrefix(&line, key)) {
      std::vector<absl::string_view> words =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
      if (!words.empty()) return std::string(words[0]);
    }
  }
  return "?";
}

}  // namespace

std::vector<std::string> DefaultNodeNames(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("node", i));
  return names;
}

absl::StatusOr<std::unique_ptr<NetnsCluster>> NetnsCluster::Create(const NetnsOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  std::shared_ptr<NetnsHost> host = options.host ? options.host : SystemNetnsHost();
  std::unique_ptr<NetnsCluster> cluster(new NetnsCluster(options, std::move(host)));
  absl::Status built = cluster->Build();
  if (!built.ok()) {
    // Destroy's own failures are logged and counted; the build error is the one to report.
    absl::Status torn = cluster->Destroy();
    if (!torn.ok()) {
      return absl::Status(built.code(),
                          absl::StrCat(built.message(), " (teardown of what was made also failed: ",
                                       torn.message(), ")"));
    }
    return built;
  }
  return cluster;
}

absl::Status NetnsCluster::Build() {
  NetnsHost& host = *host_;
  if (absl::Status s = MakeLockDir(options_.lock_dir); !s.ok()) return s;
  {
    // Held from the listing of addresses until the bridge has its own.
    absl::StatusOr<FileLock> subnet_lock =
        FileLock::Acquire(absl::StrCat(options_.lock_dir, "/subnet.lock"));
    if (!subnet_lock.ok()) return subnet_lock.status();
    absl::StatusOr<std::pair<std::string, FileLock>> prefix =
        AllocatePrefix(host, options_.lock_dir);
    if (!prefix.ok()) return prefix.status();
    lock_.emplace(std::move(prefix->second));
    spec_.kind = ClusterKind::kNetns;
    spec_.prefix = prefix->first;
    spec_.bridge = BridgeName(spec_.prefix);

    absl::StatusOr<common::CommandResult> addrs = host.Run({"ip", "-j", "-4", "addr", "show"});
    if (!addrs.ok()) return addrs.status();
    if (!addrs->status.success())
      return common::CommandFailure({"ip", "-j", "-4", "addr", "show"}, *addrs);
    const std::vector<std::string> routes_argv = {"ip",   "-j",    "-4", "route",
                                                  "show", "table", "all"};
    absl::StatusOr<common::CommandResult> routes = host.Run(routes_argv);
    if (!routes.ok()) return routes.status();
    if (!routes->status.success()) return common::CommandFailure(routes_argv, *routes);
    absl::StatusOr<std::vector<Ipv4Prefix>> used =
        PrefixesInUse(addrs->stdout_text, routes->stdout_text);
    if (!used.ok()) return used.status();
    absl::StatusOr<uint32_t> subnet = ChooseSubnet(*used);
    if (!subnet.ok()) return subnet.status();
    spec_.subnet = absl::StrCat(Ipv4ToString(*subnet), "/24");
    spec_.controller_address = Ipv4ToString(*subnet + 254);
    for (size_t i = 0; i < options_.nodes.size(); ++i) {
      NodeSpec node;
      node.name = options_.nodes[i];
      node.netns = NetnsName(spec_.prefix, node.name);
      node.address = Ipv4ToString(*subnet + static_cast<uint32_t>(i) + 1);
      node.iface = kIface;
      node.host_veth = HostVethName(spec_.prefix, static_cast<int>(i));
      spec_.nodes.push_back(std::move(node));
    }

    const std::string& br = spec_.bridge;
    if (absl::Status s = RunIp(host, "bridge", {"ip", "link", "add", br, "type", "bridge"});
        !s.ok()) {
      return s;
    }
    bridge_made_ = true;
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"ip", "link", "set", br, "addrgenmode", "none"},
             {"ip", "addr", "add", spec_.controller_address + "/24", "dev", br},
             {"ip", "link", "set", br, "up"}}) {
      if (absl::Status s = RunIp(host, "bridge", argv); !s.ok()) return s;
    }
  }  // The bridge holds the subnet now: release the subnet lock.

  for (const NodeSpec& node : spec_.nodes) {
    const std::string& ns = node.netns;
    if (absl::Status s = RunIp(host, node.name, {"ip", "netns", "add", ns}); !s.ok()) return s;
    netns_made_.push_back(ns);
    if (absl::Status s = RunIp(host, node.name,
                               {"ip", "link", "add", node.host_veth, "type", "veth", "peer", "name",
                                kIface, "netns", ns});
        !s.ok()) {
      return s;
    }
    veths_made_.push_back(node.host_veth);
    for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
             {"ip", "link", "set", node.host_veth, "addrgenmode", "none"},
             {"ip", "link", "set", node.host_veth, "master", spec_.bridge, "up"},
             {"ip", "-n", ns, "link", "set", "lo", "up"},
             {"ip", "-n", ns, "link", "set", kIface, "addrgenmode", "none"},
             {"ip", "-n", ns, "addr", "add", node.address + "/24", "dev", kIface},
             {"ip", "-n", ns, "link", "set", kIface, "up"},
             {"ip", "-n", ns, "route", "add", "default", "via", spec_.controller_address}}) {
      if (absl::Status s = RunIp(host, node.name, argv); !s.ok()) return s;
    }
  }

  if (options_.self_check) {
    const size_t k = spec_.nodes.size();
    for (const NodeSpec& node : spec_.nodes) {
      absl::Status s =
          host.ProbeTcp(node.netns, "", spec_.controller_address, options_.probe_timeout);
      if (!s.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("self-check: ", node.name, " (", node.address,
                         ") cannot reach the controller address ", spec_.controller_address, ": ",
                         s.message(), "; ", DiagnoseDrop(host, spec_, node, nullptr)));
      }
    }
    for (size_t i = 0; k > 1 && i < k; ++i) {
      const NodeSpec& from = spec_.nodes[i];
      const NodeSpec& to = spec_.nodes[(i + 1) % k];
      absl::Status s = host.ProbeTcp(from.netns, to.netns, to.address, options_.probe_timeout);
      if (!s.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("self-check: ", from.name, " (", from.address, ") cannot reach ", to.name,
                         " (", to.address, ") over ", spec_.bridge, ": ", s.message(), "; ",
                         DiagnoseDrop(host, spec_, from, &to)));
      }
    }
  }
  LOG(INFO) << "netns cluster created prefix=" << spec_.prefix << " subnet=" << spec_.subnet
            << " bridge=" << spec_.bridge << " nodes=" << spec_.nodes.size();
  return absl::OkStatus();
}

NetnsCluster::~NetnsCluster() {
  absl::Status s = Destroy();
  (void)s;  // Logged and counted by Destroy.
}

absl::Status NetnsCluster::Destroy() {
  if (!lock_.has_value() && !bridge_made_ && netns_made_.empty() && veths_made_.empty()) {
    return absl::OkStatus();
  }
  Objects objects;
  objects.veths = veths_made_;
  objects.netns = netns_made_;
  if (bridge_made_) objects.bridge = spec_.bridge;
  const int before = teardown_errors_;
  absl::Status status =
      RemoveObjects(*host_, objects, spec_.prefix, options_.errors, &teardown_errors_, nullptr);
  veths_made_.clear();
  netns_made_.clear();
  bridge_made_ = false;
  if (lock_.has_value()) {
    // Keep the lock file when something could not be removed: CleanupStale then finds the
    // leftovers' lock free (we are gone) and retries.
    if (teardown_errors_ == before) {
      absl::Status s = lock_->RemoveAndRelease();
      if (!s.ok()) {
        LOG(WARNING) << "netns teardown failed prefix=" << spec_.prefix << " error=" << s.message();
        ++teardown_errors_;
        if (options_.errors != nullptr) options_.errors->CountError("netns_destroy");
        if (status.ok()) status = s;
      }
    }
    lock_.reset();
  }
  if (teardown_errors_ == before) {
    LOG(INFO) << "netns cluster destroyed prefix=" << spec_.prefix;
  }
  return status;
}

absl::Status NetnsCluster::Detach() {
  if (!lock_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("netns cluster ", spec_.prefix, " is not held (destroyed or detached)"));
  }
  if (absl::Status s = lock_->Write(kDetachedMark); !s.ok()) return s;
  lock_.reset();
  veths_made_.clear();
  netns_made_.clear();
  bridge_made_ = false;
  LOG(INFO) << "netns cluster detached prefix=" << spec_.prefix;
  return absl::OkStatus();
}

absl::Status CheckNetnsSupport(std::shared_ptr<NetnsHost> host, const std::string& lock_dir) {
  if (!host) host = SystemNetnsHost();
  absl::StatusOr<common::CommandResult> version = host->Run({"ip", "-V"});
  if (!version.ok() || !version->status.success()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kNeeds, " and iproute2's `ip`; this process cannot run it (",
                     version.ok() ? common::CommandFailure({"ip", "-V"}, *version).message()
                                  : version.status().message(),
                     ")", kUseLoopback));
  }
  absl::StatusOr<std::string> status = host->ReadFile("/proc/self/status");
  if (!status.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(kNeeds,
                                                      "; cannot read this process's "
                                                      "capabilities: ",
                                                      status.status().message(), kUseLoopback));
  }
  const std::string uid = StatusField(*status, "Uid:");
  const std::optional<uint64_t> caps = EffectiveCaps(*status);
  std::vector<std::string> missing;
  if (!caps.has_value() || ((*caps >> kCapNetAdmin) & 1) == 0) missing.push_back("CAP_NET_ADMIN");
  if (!caps.has_value() || ((*caps >> kCapSysAdmin) & 1) == 0) missing.push_back("CAP_SYS_ADMIN");
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(kNeeds, "; this process has uid ", uid,
                                                      " without ", absl::StrJoin(missing, ", "),
                                                      kUseLoopback));
  }
  // A user namespace of its own (Bazel's linux-sandbox): its capabilities stop at its borders.
  std::string userns_note;
  absl::StatusOr<std::string> uid_map = host->ReadFile("/proc/self/uid_map");
  if (uid_map.ok()) {
    std::vector<std::string> words =
        absl::StrSplit(*uid_map, absl::ByAnyChar(" \t\n"), absl::SkipWhitespace());
    if (words != std::vector<std::string>{"0", "0", "4294967295"}) {
      userns_note = absl::StrCat(" (this process runs in a user namespace of its own, uid_map '",
                                 absl::StrJoin(words, " "),
                                 "', as in Bazel's sandbox: tag the test no-sandbox)");
    }
  }
  // Try: a namespace and a bridge of a fresh prefix.
  auto refuse = [&](const absl::Status& s) {
    return absl::FailedPreconditionError(absl::StrCat(kNeeds, "; this process (uid ", uid, ") ",
                                                      "cannot: ", s.message(), userns_note,
                                                      kUseLoopback));
  };
  if (absl::Status s = MakeLockDir(lock_dir); !s.ok()) return refuse(s);
  absl::StatusOr<std::pair<std::string, FileLock>> prefix = AllocatePrefix(*host, lock_dir);
  if (!prefix.ok()) return refuse(prefix.status());
  Objects probe;
  const std::string ns = NetnsName(prefix->first, "probe");
  const std::string br = BridgeName(prefix->first);
  absl::Status tried = RunIp(*host, "probe", {"ip", "netns", "add", ns});
  if (tried.ok()) {
    probe.netns.push_back(ns);
    tried = RunIp(*host, "probe", {"ip", "link", "add", br, "type", "bridge"});
    if (tried.ok()) probe.bridge = br;
  }
  int failures = 0;
  absl::Status removed = RemoveObjects(*host, probe, prefix->first, nullptr, &failures, nullptr);
  // With something left over the lock file stays, for CleanupStaleNetns to find it.
  if (removed.ok()) removed = prefix->second.RemoveAndRelease();
  if (!tried.ok()) return refuse(tried);
  if (!removed.ok()) return refuse(removed);
  return absl::OkStatus();
}

absl::StatusOr<NetnsCleanupReport> CleanupStaleNetns(std::shared_ptr<NetnsHost> host,
                                                     const std::string& lock_dir,
                                                     common::ErrorCounter* errors) {
  if (!host) host = SystemNetnsHost();
  absl::StatusOr<std::vector<std::string>> links = ListLinks(*host);
  if (!links.ok()) return links.status();
  absl::StatusOr<std::vector<std::string>> spaces = ListNetns(*host);
  if (!spaces.ok()) return spaces.status();
  struct Found {
    pid_t pid = 0;
    Objects objects;
  };
  std::map<std::string, Found> by_prefix;
  for (const std::string& l : *links) {
    std::optional<FalconNetName> n = ParseLinkName(l);
    if (!n.has_value()) continue;
    Found& f = by_prefix[n->prefix];
    f.pid = n->pid;
    if (n->kind == FalconNetName::Kind::kBridge) {
      f.objects.bridge = l;
    } else {
      f.objects.veths.push_back(l);
    }
  }
  for (const std::string& s : *spaces) {
    std::optional<FalconNetName> n = ParseNetnsName(s);
    if (!n.has_value()) continue;
    Found& f = by_prefix[n->prefix];
    f.pid = n->pid;
    f.objects.netns.push_back(s);
  }
  // Lock files of prefixes with nothing left (a creator killed before it made anything, or a
  // teardown that failed after removing everything).
  if (DIR* dir = opendir(lock_dir.c_str()); dir != nullptr) {
    while (const dirent* e = readdir(dir)) {
      absl::string_view name = e->d_name;
      if (!absl::ConsumeSuffix(&name, ".lock")) continue;
      if (std::optional<pid_t> pid = PrefixCreatorPid(name)) {
        by_prefix[std::string(name)].pid = *pid;
      }
    }
    closedir(dir);
  }
  NetnsCleanupReport report;
  for (auto& [prefix, found] : by_prefix) {
    if (host->ProcessAlive(found.pid)) {
      report.kept.push_back(absl::StrCat(prefix, ": creator pid ", found.pid, " lives"));
      continue;
    }
    const std::string lock_path = LockPath(lock_dir, prefix);
    std::optional<FileLock> lock;
    struct stat st;
    if (stat(lock_path.c_str(), &st) == 0) {
      absl::StatusOr<FileLock> taken = FileLock::TryAcquire(lock_path);
      if (absl::IsUnavailable(taken.status())) {
        report.kept.push_back(absl::StrCat(prefix, ": ", lock_path,
                                           " is held (its creator lives, in another PID "
                                           "namespace)"));
        continue;
      }
      if (!taken.ok()) return taken.status();
      absl::StatusOr<std::string> mark = taken->Read();
      if (mark.ok() && *mark == kDetachedMark) {
        report.kept.push_back(absl::StrCat(prefix,
                                           ": detached (remove it with `falcon_netns "
                                           "destroy --spec`)"));
        continue;
      }
      lock.emplace(*std::move(taken));
    }
    if (!lock.has_value() && found.objects.veths.empty() && found.objects.netns.empty() &&
        found.objects.bridge.empty()) {
      continue;
    }
    int failures = 0;
    absl::Status s =
        RemoveObjects(*host, found.objects, prefix, errors, &failures, &report.removed);
    report.errors += failures;
    if (s.ok() && lock.has_value()) {
      if (absl::Status r = lock->RemoveAndRelease(); r.ok()) {
        report.removed.push_back(lock_path);
      } else {
        LOG(WARNING) << "netns cleanup failed prefix=" << prefix << " error=" << r.message();
        ++report.errors;
        if (errors != nullptr) errors->CountError("netns_destroy");
      }
    }
    LOG(INFO) << "netns leftovers removed prefix=" << prefix << " creator_pid=" << found.pid
              << " failures=" << failures;
  }
  return report;
}

absl::Status DestroyNetnsCluster(const ClusterSpec& spec, std::shared_ptr<NetnsHost> host,
                                 const std::string& lock_dir, common::ErrorCounter* errors) {
  if (!host) host = SystemNetnsHost();
  if (spec.kind != ClusterKind::kNetns) {
    return absl::InvalidArgumentError("cluster spec: kind is not netns (nothing to destroy)");
  }
  auto ours = [&](const std::optional<FalconNetName>& n) {
    return n.has_value() && n->prefix == spec.prefix;
  };
  std::optional<FalconNetName> bridge = ParseLinkName(spec.bridge);
  if (!ours(bridge) || bridge->kind != FalconNetName::Kind::kBridge) {
    return absl::InvalidArgumentError(absl::StrCat("cluster spec: bridge '", spec.bridge,
                                                   "' is not a Falcon bridge of prefix '",
                                                   spec.prefix, "'"));
  }
  Objects objects;
  objects.bridge = spec.bridge;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& node = spec.nodes[i];
    std::optional<FalconNetName> veth = ParseLinkName(node.host_veth);
    std::optional<FalconNetName> ns = ParseNetnsName(node.netns);
    if (!ours(veth) || veth->kind != FalconNetName::Kind::kHostVeth || !ours(ns)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster spec: nodes[", i, "] (", node.name, "): host_veth '", node.host_veth,
          "' or netns '", node.netns, "' is not Falcon's of prefix '", spec.prefix, "'"));
    }
    objects.veths.push_back(node.host_veth);
    objects.netns.push_back(node.netns);
  }
  const std::string lock_path = LockPath(lock_dir, spec.prefix);
  absl::StatusOr<FileLock> lock = FileLock::TryAcquire(lock_path);
  if (absl::IsUnavailable(lock.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("netns cluster ", spec.prefix, " is still held by its creator (", lock_path,
                     " is locked): stop that process (SIGINT) instead"));
  }
  if (!lock.ok()) return lock.status();
  int failures = 0;
  absl::Status s = RemoveObjects(*host, objects, spec.prefix, errors, &failures, nullptr);
  if (!s.ok()) return s;
  if (absl::Status r = lock->RemoveAndRelease(); !r.ok()) return r;
  LOG(INFO) << "netns cluster destroyed prefix=" << spec.prefix;
  return absl::OkStatus();
}

}  // namespace falcon::cluster
