// NetnsCluster against a fake machine: the exact commands, their order, teardown (also of a
// half-made cluster), the self-check's diagnosis, detaching and option checks.
#include "cluster/netns.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cluster/fake_netns_host.h"
#include "cluster/netns_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string FreshDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/netns_test.XXXXXX");
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class CountingErrors : public common::ErrorCounter {
 public:
  void CountError(absl::string_view where) override { wheres.emplace_back(where); }
  std::vector<std::string> wheres;
};

class NetnsClusterTest : public ::testing::Test {
 protected:
  NetnsOptions Options(int nodes) {
    NetnsOptions o;
    o.nodes = DefaultNodeNames(nodes);
    o.host = host_;
    o.lock_dir = lock_dir_;
    o.errors = &errors_;
    return o;
  }
  // The commands that make a 2-node cluster of `prefix` on 10.77.1.0/24.
  static std::vector<std::string> CreateCommands(const std::string& p) {
    return {
        "ip -j link show",
        "ip -j netns list",
        "ip -j -4 addr show",
        "ip -j -4 route show table all",
        absl::StrCat("ip link add ", p, "br type bridge"),
        absl::StrCat("ip link set ", p, "br addrgenmode none"),
        absl::StrCat("ip addr add 10.77.1.254/24 dev ", p, "br"),
        absl::StrCat("ip link set ", p, "br up"),
        absl::StrCat("ip netns add ", p, "-node0"),
        absl::StrCat("ip link add ", p, "h0 type veth peer name eth0 netns ", p, "-node0"),
        absl::StrCat("ip link set ", p, "h0 addrgenmode none"),
        absl::StrCat("ip link set ", p, "h0 master ", p, "br up"),
        absl::StrCat("ip -n ", p, "-node0 link set lo up"),
        absl::StrCat("ip -n ", p, "-node0 link set eth0 addrgenmode none"),
        absl::StrCat("ip -n ", p, "-node0 addr add 10.77.1.1/24 dev eth0"),
        absl::StrCat("ip -n ", p, "-node0 link set eth0 up"),
        absl::StrCat("ip -n ", p, "-node0 route add default via 10.77.1.254"),
        absl::StrCat("ip netns add ", p, "-node1"),
        absl::StrCat("ip link add ", p, "h1 type veth peer name eth0 netns ", p, "-node1"),
        absl::StrCat("ip link set ", p, "h1 addrgenmode none"),
        absl::StrCat("ip link set ", p, "h1 master ", p, "br up"),
        absl::StrCat("ip -n ", p, "-node1 link set lo up"),
        absl::StrCat("ip -n ", p, "-node1 link set eth0 addrgenmode none"),
        absl::StrCat("ip -n ", p, "-node1 addr add 10.77.1.2/24 dev eth0"),
        absl::StrCat("ip -n ", p, "-node1 link set eth0 up"),
        absl::StrCat("ip -n ", p, "-node1 route add default via 10.77.1.254"),
    };
  }
  static std::vector<std::string> DestroyCommands(const std::string& p) {
    return {
        "ip -j link show",
        "ip -j netns list",
        absl::StrCat("ip link del ", p, "h1"),
        absl::StrCat("ip link del ", p, "h0"),
        absl::StrCat("ip netns del ", p, "-node1"),
        absl::StrCat("ip netns del ", p, "-node0"),
        absl::StrCat("ip link del ", p, "br"),
    };
  }
  void SetUp() override {
    lock_dir_ = FreshDir();
    ASSERT_FALSE(lock_dir_.empty());
    // 10.77.0.0/24 is taken by an address: the cluster gets the next /24.
    host_->addr_json = R"([{"ifname":"eth0","addr_info":[{"local":"192.0.2.2","prefixlen":24}]},)"
                       R"({"ifname":"x","addr_info":[{"local":"10.77.0.9","prefixlen":24}]}])";
  }
  // Nothing of `prefix` is left in the fake machine or the lock directory.
  void ExpectGone(const std::string& prefix) {
    for (const std::string& l : host_->links) EXPECT_FALSE(ParseLinkName(l).has_value()) << l;
    EXPECT_THAT(host_->netns, IsEmpty());
    EXPECT_FALSE(Exists(absl::StrCat(lock_dir_, "/", prefix, ".lock")));
  }

  std::shared_ptr<FakeNetnsHost> host_ = std::make_shared<FakeNetnsHost>();
  std::string lock_dir_;
  CountingErrors errors_;
};

TEST_F(NetnsClusterTest, CreatesBridgeNamespacesVethsAddressesAndRoutesInOrder) {
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
  ASSERT_TRUE(c.ok()) << c.status();
  const ClusterSpec& spec = (*c)->spec();
  const std::string& p = spec.prefix;
  ASSERT_EQ(PrefixCreatorPid(p), getpid()) << p;
  EXPECT_THAT(host_->TakeCommands(), ElementsAreArray(CreateCommands(p)));

  EXPECT_EQ(spec.kind, ClusterKind::kNetns);
  EXPECT_EQ(spec.bridge, p + "br");
  EXPECT_EQ(spec.subnet, "10.77.1.0/24");
  EXPECT_EQ(spec.controller_address, "10.77.1.254");
  ASSERT_EQ(spec.nodes.size(), 2u);
  EXPECT_EQ(spec.nodes[1].name, "node1");
  EXPECT_EQ(spec.nodes[1].netns, p + "-node1");
  EXPECT_EQ(spec.nodes[1].address, "10.77.1.2");
  EXPECT_EQ(spec.nodes[1].iface, "eth0");
  EXPECT_EQ(spec.nodes[1].host_veth, p + "h1");
  // The lock file is held and says whose it is.
  const std::string lock = absl::StrCat(lock_dir_, "/", p, ".lock");
  EXPECT_TRUE(Exists(lock));
  EXPECT_TRUE(absl::IsUnavailable(FileLock::TryAcquire(lock).status()));

  // Self-check: every node to the controller address, then each to the next.
  ASSERT_EQ(host_->probes.size(), 4u);
  EXPECT_EQ(host_->probes[0].connect_netns, p + "-node0");
  EXPECT_EQ(host_->probes[0].listen_netns, "");
  EXPECT_EQ(host_->probes[0].listen_address, "10.77.1.254");
  EXPECT_EQ(host_->probes[3].connect_netns, p + "-node1");
  EXPECT_EQ(host_->probes[3].listen_netns, p + "-node0");
  EXPECT_EQ(host_->probes[3].listen_address, "10.77.1.1");

  // Veths (each takes its node end along), then namespaces, then the bridge; then nothing more.
  EXPECT_TRUE((*c)->Destroy().ok());
  EXPECT_THAT(host_->TakeCommands(), ElementsAreArray(DestroyCommands(p)));
  ExpectGone(p);
  EXPECT_TRUE((*c)->Destroy().ok());
  c->reset();
  EXPECT_THAT(host_->TakeCommands(), IsEmpty());
  EXPECT_EQ(errors_.wheres.size(), 0u);
}

TEST_F(NetnsClusterTest, TheDestructorDestroys) {
  std::string prefix;
  {
    absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
    ASSERT_TRUE(c.ok()) << c.status();
    prefix = (*c)->spec().prefix;
    host_->TakeCommands();
  }
  EXPECT_THAT(host_->TakeCommands(), ElementsAreArray(DestroyCommands(prefix)));
  ExpectGone(prefix);
}

TEST_F(NetnsClusterTest, FailedCommandNamesNodeCommandAndStderrAndTearsDownWhatWasMade) {
  host_->fail_on = "-node1 addr add";
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(3));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kInternal) << c.status();
  EXPECT_THAT(c.status().message(),
              HasSubstr("node1: `ip -n fn"));  // The prefix is this process's.
  EXPECT_THAT(c.status().message(),
              HasSubstr("-node1 addr add 10.77.1.2/24 dev eth0` exited with code 2: RTNETLINK "
                        "answers: File exists"));
  // node2 was never started; node0 and node1 and the bridge are gone again.
  const std::vector<std::string> commands = host_->TakeCommands();
  for (const std::string& line : commands) EXPECT_THAT(line, ::testing::Not(HasSubstr("node2")));
  ASSERT_GE(commands.size(), 5u);
  const std::vector<std::string> tail(commands.end() - 5, commands.end());
  EXPECT_THAT(tail[0], HasSubstr("h1"));
  EXPECT_THAT(tail[0], HasSubstr("ip link del"));
  EXPECT_THAT(tail[4], HasSubstr("br"));
  EXPECT_THAT(tail[4], HasSubstr("ip link del"));
  for (const std::string& l : host_->links) EXPECT_FALSE(ParseLinkName(l).has_value()) << l;
  EXPECT_THAT(host_->netns, IsEmpty());
}

TEST_F(NetnsClusterTest, DropBetweenNodesIsExplainedByTheBridgeNetfilterHook) {
  host_->files["/proc/sys/net/bridge/bridge-nf-call-iptables"] = "1\n";
  host_->files["/proc/net/ip_tables_names"] = "filter\nnat\n";
  host_->missing_programs.clear();
  host_->outputs["iptables -S FORWARD"] = "-P FORWARD DROP\n-A FORWARD -j DOCKER-USER\n";
  host_->fail_probe = [](const FakeNetnsHost::Probe& p) {
    return absl::EndsWith(p.listen_netns, "-node1");
  };
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  const std::string m(c.status().message());
  EXPECT_THAT(m, HasSubstr("self-check: node0 (10.77.1.1) cannot reach node1 (10.77.1.2) over fn"));
  EXPECT_THAT(m, HasSubstr("connect timed out after 5s"));
  EXPECT_THAT(m, HasSubstr("br_netfilter is loaded and net.bridge.bridge-nf-call-iptables=1"));
  EXPECT_THAT(m, HasSubstr("(iptables tables loaded: filter, nat)"));
  EXPECT_THAT(m, ::testing::ContainsRegex("`iptables -I FORWARD -i fn[0-9a-f]+[g-z]br -o "
                                          "fn[0-9a-f]+[g-z]br -j ACCEPT`"));
  EXPECT_THAT(m, HasSubstr("`iptables -S FORWARD`: -P FORWARD DROP | -A FORWARD -j DOCKER-USER"));
  for (const std::string& l : host_->links) EXPECT_FALSE(ParseLinkName(l).has_value()) << l;
  EXPECT_THAT(host_->netns, IsEmpty());
}

TEST_F(NetnsClusterTest, DropWithoutTheHookPointsAtNftablesAndTheBridgePorts) {
  host_->files["/proc/sys/net/bridge/bridge-nf-call-iptables"] = "0\n";
  host_->fail_probe = [](const FakeNetnsHost::Probe& p) { return !p.listen_netns.empty(); };
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(3));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("net.bridge.bridge-nf-call-iptables=0"));
  EXPECT_THAT(c.status().message(), HasSubstr("nft list ruleset"));
}

TEST_F(NetnsClusterTest, UnreachableControllerIsExplainedAsTheInputChain) {
  host_->fail_probe = [](const FakeNetnsHost::Probe& p) { return p.listen_netns.empty(); };
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("self-check: node0 (10.77.1.1) cannot reach the "
                                              "controller address 10.77.1.254"));
  EXPECT_THAT(c.status().message(), HasSubstr("INPUT"));
  EXPECT_THAT(host_->netns, IsEmpty());
}

TEST_F(NetnsClusterTest, NoSelfCheckWhenOff) {
  NetnsOptions o = Options(2);
  o.self_check = false;
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(host_->probes, IsEmpty());
}

TEST_F(NetnsClusterTest, TeardownFailuresAreReturnedLoggedAndCounted) {
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string p = (*c)->spec().prefix;
  host_->fail_on = absl::StrCat("ip link del ", p, "h1");
  host_->fail_stderr = "RTNETLINK answers: Device or resource busy";
  absl::Status s = (*c)->Destroy();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(p, "h1: `ip link del ", p,
                                                  "h1` exited with code 2: RTNETLINK answers: "
                                                  "Device or resource busy")));
  EXPECT_EQ((*c)->teardown_errors(), 1);
  EXPECT_THAT(errors_.wheres, ElementsAre("netns_destroy"));
  // The rest was still removed; the lock file stays for CleanupStaleNetns to retry.
  EXPECT_EQ(host_->links.count(p + "h0"), 0u);
  EXPECT_EQ(host_->links.count(p + "br"), 0u);
  EXPECT_THAT(host_->netns, IsEmpty());
  EXPECT_TRUE(Exists(absl::StrCat(lock_dir_, "/", p, ".lock")));
  // Destroy is done: a second call does nothing.
  host_->TakeCommands();
  EXPECT_TRUE((*c)->Destroy().ok());
  EXPECT_THAT(host_->TakeCommands(), IsEmpty());
}

TEST_F(NetnsClusterTest, DetachLeavesEverythingAndMarksTheLockFile) {
  std::string p;
  {
    absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(Options(2));
    ASSERT_TRUE(c.ok()) << c.status();
    p = (*c)->spec().prefix;
    ASSERT_TRUE((*c)->Detach().ok());
    EXPECT_EQ((*c)->Detach().code(), absl::StatusCode::kFailedPrecondition);
    host_->TakeCommands();
  }
  EXPECT_THAT(host_->TakeCommands(), IsEmpty());
  EXPECT_EQ(host_->netns.size(), 2u);
  absl::StatusOr<FileLock> lock = FileLock::TryAcquire(absl::StrCat(lock_dir_, "/", p, ".lock"));
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(*lock->Read(), "detached\n");
}

TEST_F(NetnsClusterTest, ParallelClustersOfOneProcessGetDistinctPrefixesAndSubnets) {
  absl::StatusOr<std::unique_ptr<NetnsCluster>> a = NetnsCluster::Create(Options(1));
  ASSERT_TRUE(a.ok()) << a.status();
  // The first cluster's bridge holds 10.77.1.254/24.
  absl::StatusOr<std::unique_ptr<NetnsCluster>> b = NetnsCluster::Create(Options(1));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->spec().prefix, (*b)->spec().prefix);
  EXPECT_EQ((*b)->spec().subnet, "10.77.2.0/24");
}

TEST_F(NetnsClusterTest, BadOptionsNameTheField) {
  NetnsOptions o = Options(0);
  EXPECT_THAT(NetnsCluster::Create(o).status().message(), HasSubstr("options.nodes: 0 nodes"));
  o = Options(254);
  EXPECT_THAT(NetnsCluster::Create(o).status().message(), HasSubstr("1 to 253"));
  o = Options(2);
  o.nodes[1] = "node0";
  EXPECT_THAT(NetnsCluster::Create(o).status().message(),
              HasSubstr("options.nodes[1]: 'node0' twice"));
  o.nodes[1] = "a/b";
  EXPECT_THAT(NetnsCluster::Create(o).status().message(), HasSubstr("options.nodes[1]: 'a/b'"));
  o = Options(2);
  o.probe_timeout = absl::ZeroDuration();
  EXPECT_EQ(NetnsCluster::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(host_->commands, IsEmpty());
}

}  // namespace
}  // namespace falcon::cluster
