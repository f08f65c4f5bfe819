// A real 3-node netns cluster on this machine (needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN,
// outside Bazel's sandbox: see BUILD). Checks what the fake-host tests cannot: the nodes really
// are separate hosts whose traffic crosses their veths, each reaches the controller address, a
// program started with CommandInNode() runs in its node's namespace under the pid Subprocess
// reports, Destroy leaves nothing of the prefix behind, and CleanupStaleNetns removes a killed
// creator's cluster.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cluster/netns.h"
#include "common/subprocess.h"
#include "common/text_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/skip.h"

namespace falcon::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr size_t kTransferBytes = size_t{1} << 20;

uint64_t Counter(const std::string& link, const char* name) {
  absl::StatusOr<std::string> text =
      common::ReadTextFile(absl::StrCat("/sys/class/net/", link, "/statistics/", name));
  uint64_t v = 0;
  EXPECT_TRUE(text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v))
      << link << " " << name;
  return v;
}

// Names of links of the root namespace and of namespaces that start with `prefix`.
std::vector<std::string> Leftovers(const std::string& prefix) {
  std::vector<std::string> found;
  for (const char* dir : {"/sys/class/net", kNetnsRunDir}) {
    DIR* d = opendir(dir);
    if (d == nullptr) continue;  // No /run/netns: no namespace at all.
    while (const dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, prefix)) found.emplace_back(e->d_name);
    }
    closedir(d);
  }
  return found;
}

// Sends kTransferBytes over TCP from namespace `from` to `address` in namespace `to`.
void Transfer(const std::string& from, const std::string& to, const std::string& address) {
  absl::StatusOr<int> listener = TcpSocketIn(to);
  ASSERT_TRUE(listener.ok()) << listener.status();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ASSERT_EQ(inet_pton(AF_INET, address.c_str(), &addr.sin_addr), 1);
  ASSERT_EQ(bind(*listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << address;
  ASSERT_EQ(listen(*listener, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(*listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  size_t received = 0;
  std::thread server([&] {
    const int conn = accept(*listener, nullptr, nullptr);
    if (conn < 0) return;
    char buf[65536];
    ssize_t n;
    while ((n = read(conn, buf, sizeof(buf))) > 0) received += static_cast<size_t>(n);
    close(conn);
  });
  absl::StatusOr<int> client = TcpSocketIn(from);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_EQ(connect(*client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << "connect from " << from << " to " << address << ": " << std::strerror(errno);
  const std::string data(kTransferBytes, 'f');
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = write(*client, data.data() + sent, data.size() - sent);
    ASSERT_GT(n, 0) << std::strerror(errno);
    sent += static_cast<size_t>(n);
  }
  close(*client);
  server.join();
  close(*listener);
  EXPECT_EQ(received, kTransferBytes);
}

class NetnsRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = CheckNetnsSupport(); !s.ok()) {
      FALCON_SKIP_OR_FAIL(std::string(s.message()));
    }
  }
};

TEST_F(NetnsRealTest, ThreeNodesAreHostsOnOneBridge) {
  NetnsOptions o;
  o.nodes = DefaultNodeNames(3);
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const ClusterSpec spec = (*c)->spec();
  const NodeSpec& n0 = spec.nodes[0];
  const NodeSpec& n2 = spec.nodes[2];

  // node0 -> node2 crosses node0's veth (the bridge receives it) and node2's (the bridge sends it).
  const uint64_t rx0 = Counter(n0.host_veth, "rx_bytes");
  const uint64_t tx2 = Counter(n2.host_veth, "tx_bytes");
  const uint64_t tx1 = Counter(spec.nodes[1].host_veth, "tx_bytes");
  Transfer(n0.netns, n2.netns, n2.address);
  EXPECT_GE(Counter(n0.host_veth, "rx_bytes") - rx0, kTransferBytes);
  EXPECT_GE(Counter(n2.host_veth, "tx_bytes") - tx2, kTransferBytes);
  // The bridge learned the addresses: node1's veth did not carry the transfer.
  EXPECT_LT(Counter(spec.nodes[1].host_veth, "tx_bytes") - tx1, kTransferBytes);

  // Every node reaches the controller address (a listener in this, the root, namespace).
  std::shared_ptr<NetnsHost> host = SystemNetnsHost();
  for (const NodeSpec& n : spec.nodes) {
    absl::Status s = host->ProbeTcp(n.netns, "", spec.controller_address, absl::Seconds(10));
    EXPECT_TRUE(s.ok()) << n.name << ": " << s;
  }
  // The node addresses exist only inside the cluster: the root namespace has only the bridge's.
  absl::StatusOr<common::CommandResult> addrs = host->Run({"ip", "-j", "-4", "addr", "show"});
  ASSERT_TRUE(addrs.ok() && addrs->status.success());
  EXPECT_THAT(addrs->stdout_text, HasSubstr(absl::StrCat("\"", spec.controller_address, "\"")));
  for (const NodeSpec& n : spec.nodes) {
    EXPECT_THAT(addrs->stdout_text, Not(HasSubstr(absl::StrCat("\"", n.address, "\""))));
  }

  // A program run with CommandInNode() is exec'd by `ip netns exec`: the pid Subprocess reports
  // becomes the program itself, inside node2's network namespace, and PR_SET_PDEATHSIG is still
  // armed.
  common::SpawnOptions so;
  so.argv = CommandInNode(n2, {"/bin/sleep", "60"});
  so.search_path = true;  // For "ip", as the launcher does.
  so.parent_death_signal = SIGKILL;
  absl::StatusOr<common::Subprocess> sleeper = common::Subprocess::Spawn(so);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  const std::string proc = absl::StrCat("/proc/", sleeper->pid());
  std::string comm;
  for (const absl::Time bound = absl::Now() + absl::Seconds(30); absl::Now() < bound;) {
    absl::StatusOr<std::string> text = common::ReadTextFile(proc + "/comm");
    comm = text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
    if (comm == "sleep") break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(comm, "sleep");
  struct stat in_proc;
  struct stat in_run;
  ASSERT_EQ(stat((proc + "/ns/net").c_str(), &in_proc), 0);
  ASSERT_EQ(stat(absl::StrCat(kNetnsRunDir, "/", n2.netns).c_str(), &in_run), 0);
  EXPECT_EQ(in_proc.st_ino, in_run.st_ino);
  absl::StatusOr<std::string> status = common::ReadTextFile(proc + "/status");
  ASSERT_TRUE(status.ok());
  EXPECT_THAT(*status, HasSubstr(absl::StrCat("PPid:\t", getpid(), "\n")));
  ASSERT_TRUE(sleeper->Stop(SIGTERM, absl::Seconds(10)).ok());

  absl::Status destroyed = (*c)->Destroy();
  EXPECT_TRUE(destroyed.ok()) << destroyed;
  EXPECT_EQ((*c)->teardown_errors(), 0);
  EXPECT_THAT(Leftovers(spec.prefix), IsEmpty());
  struct stat st;
  EXPECT_NE(stat(absl::StrCat(kDefaultNetnsLockDir, "/", spec.prefix, ".lock").c_str(), &st), 0);
}

TEST_F(NetnsRealTest, CleanupRemovesAKilledCreatorsClusterOnly) {
  // A live cluster of this process, which cleanup must leave alone.
  NetnsOptions mine;
  mine.nodes = DefaultNodeNames(1);
  absl::StatusOr<std::unique_ptr<NetnsCluster>> live = NetnsCluster::Create(mine);
  ASSERT_TRUE(live.ok()) << live.status();

  // A creator that is SIGKILLed with its cluster up.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  common::SpawnOptions so;
  so.name = "creator";
  absl::StatusOr<common::Subprocess> creator = common::Subprocess::SpawnFunction(so, [&]() -> int {
    NetnsOptions o;
    o.nodes = DefaultNodeNames(2);
    o.self_check = false;  // No threads in a forked child.
    absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(o);
    const std::string line = c.ok() ? (*c)->spec().prefix + "\n" : "-\n";
    if (write(pipe_fds[1], line.data(), line.size()) < 0) return 1;
    pause();
    return 0;
  });
  ASSERT_TRUE(creator.ok()) << creator.status();
  close(pipe_fds[1]);
  std::string prefix;
  char ch;
  while (read(pipe_fds[0], &ch, 1) == 1 && ch != '\n') prefix += ch;
  close(pipe_fds[0]);
  ASSERT_TRUE(absl::StartsWith(prefix, "fn")) << "the creator could not make its cluster";
  EXPECT_EQ(Leftovers(prefix).size(), 5u);  // Bridge, 2 veths, 2 namespaces.
  ASSERT_TRUE(creator->Stop(SIGKILL, absl::ZeroDuration()).ok());

  absl::StatusOr<NetnsCleanupReport> report = CleanupStaleNetns();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->errors, 0);
  EXPECT_THAT(Leftovers(prefix), IsEmpty());
  EXPECT_THAT(report->removed, ::testing::Contains(prefix + "br"));
  const std::string my_prefix = (*live)->spec().prefix;
  EXPECT_EQ(Leftovers(my_prefix).size(), 3u);
  EXPECT_THAT(report->kept,
              ::testing::Contains(::testing::StartsWith(my_prefix + ": creator pid")));
  EXPECT_TRUE((*live)->Destroy().ok());
  EXPECT_THAT(Leftovers(my_prefix), IsEmpty());
}

// The real machine, except that once node1 is made, everything sent to it is dropped (a tbf
// qdisc with a 1-byte bucket on its host veth): the self-check must catch it.
class DroppingHost : public NetnsHost {
 public:
  absl::StatusOr<common::CommandResult> Run(const std::vector<std::string>& argv) override {
    absl::StatusOr<common::CommandResult> r = real_->Run(argv);
    if (argv.size() > 4 && argv[1] == "-n" && absl::EndsWith(argv[2], "-node1") &&
        argv[3] == "route") {
      prefix = argv[2].substr(0, argv[2].find('-'));
      const std::vector<std::string> tc = {"tc",   "qdisc", "add",  "dev",  prefix + "h1",
                                           "root", "tbf",   "rate", "8bit", "burst",
                                           "1",    "limit", "1"};
      absl::StatusOr<common::CommandResult> shaped = real_->Run(tc);
      shaping = !shaped.ok()               ? shaped.status()
                : shaped->status.success() ? absl::OkStatus()
                                           : common::CommandFailure(tc, *shaped);
    }
    return r;
  }
  absl::Status ProbeTcp(const std::string& connect_netns, const std::string& listen_netns,
                        const std::string& listen_address, absl::Duration timeout) override {
    return real_->ProbeTcp(connect_netns, listen_netns, listen_address, timeout);
  }
  bool ProcessAlive(pid_t pid) override { return real_->ProcessAlive(pid); }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return real_->ReadFile(path);
  }

  std::string prefix;
  std::optional<absl::Status> shaping;  // Set once node1 is made.

 private:
  std::shared_ptr<NetnsHost> real_ = SystemNetnsHost();
};

TEST_F(NetnsRealTest, SelfCheckCatchesADroppingLinkAndCreateRemovesEverything) {
  auto host = std::make_shared<DroppingHost>();
  NetnsOptions o;
  o.nodes = DefaultNodeNames(3);
  o.host = host;
  o.probe_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<NetnsCluster>> c = NetnsCluster::Create(o);
  ASSERT_TRUE(host->shaping.has_value()) << "node1's route was never added: " << c.status();
  if (!host->shaping->ok()) {
    FALCON_SKIP_OR_FAIL(
        absl::StrCat("cannot shape a veth with tc tbf: ", host->shaping->message()));
  }
  ASSERT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(c.status().message(),
              HasSubstr("self-check: node1 (10."));  // node0 reached the controller first.
  EXPECT_THAT(c.status().message(), HasSubstr("cannot reach the controller address"));
  EXPECT_THAT(c.status().message(), HasSubstr("timed out after 1s"));
  EXPECT_THAT(c.status().message(),
              HasSubstr(absl::StrCat("tc qdisc show dev ", host->prefix, "h1")));
  EXPECT_THAT(Leftovers(host->prefix), IsEmpty());
}

}  // namespace
}  // namespace falcon::cluster
