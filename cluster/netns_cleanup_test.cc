// Leftovers and checks against a fake machine: which stale links and namespaces CleanupStaleNetns
// removes (dead creator, lock free) and which it never touches (a live creator, a held lock, a
// detached cluster, any name outside the pattern); DestroyNetnsCluster's refusals; the sentences of
// CheckNetnsSupport.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cluster/fake_netns_host.h"
#include "cluster/netns.h"
#include "cluster/netns_names.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

std::string FreshDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/netns_cleanup.XXXXXX");
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

std::vector<std::string> LockFiles(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str()); d != nullptr) {
    while (const dirent* e = readdir(d)) {
      if (absl::EndsWith(e->d_name, ".lock")) names.emplace_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// pid 0x1a (dead), 0x2b (alive), 0x3c (dead, lock held elsewhere), 0x4d (dead, detached).
constexpr pid_t kDead = 0x1a;
constexpr pid_t kLive = 0x2b;
constexpr pid_t kHeld = 0x3c;
constexpr pid_t kDetached = 0x4d;

class CleanupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lock_dir_ = FreshDir();
    ASSERT_FALSE(lock_dir_.empty());
    host_->alive = {kLive};
    for (pid_t pid : {kDead, kLive, kHeld, kDetached}) {
      const std::string p = NetnsPrefix(pid, 0);
      host_->links.insert({p + "br", p + "h0", p + "h1"});
      host_->netns.insert({p + "-node0", p + "-node1"});
    }
    // Not Falcon's, though some look close: never touched.
    foreign_links_ = {"eth0",     "lo",       "fnord",    "fn1a",          "fn1agbr0", "fn1agh",
                      "fn1agx0",  "fn01agbr", "fnAgbr",   "docker0",       "veth1a2b", "fn1aGbr",
                      "fn1agh0x", "xfn1agbr", "fn1agbr-", "fn123456789gbr"};
    foreign_netns_ = {"cni-1234", "fn1ag", "fn1ag-", "fn1ag-a/b", "fn1a-node0", "blue"};
    host_->links.insert(foreign_links_.begin(), foreign_links_.end());
    host_->netns.insert(foreign_netns_.begin(), foreign_netns_.end());
  }
  std::string Lock(pid_t pid) { return absl::StrCat(lock_dir_, "/", NetnsPrefix(pid, 0), ".lock"); }

  std::shared_ptr<FakeNetnsHost> host_ = std::make_shared<FakeNetnsHost>();
  std::string lock_dir_;
  std::vector<std::string> foreign_links_;
  std::vector<std::string> foreign_netns_;
};

TEST_F(CleanupTest, RemovesOnlyDeadCreatorsLeftoversAndNeverForeignNames) {
  // kHeld's creator holds its lock (it lives in another PID namespace); kDetached was detached.
  absl::StatusOr<FileLock> held = FileLock::Acquire(Lock(kHeld));
  ASSERT_TRUE(held.ok()) << held.status();
  {
    absl::StatusOr<FileLock> detached = FileLock::Acquire(Lock(kDetached));
    ASSERT_TRUE(detached.ok()) << detached.status();
    ASSERT_TRUE(detached->Write("detached\n").ok());
  }
  // kDead left a lock file too, unlocked (it died).
  { ASSERT_TRUE(FileLock::Acquire(Lock(kDead)).ok()); }

  absl::StatusOr<NetnsCleanupReport> r = CleanupStaleNetns(host_, lock_dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string d = NetnsPrefix(kDead, 0);
  EXPECT_THAT(r->removed, UnorderedElementsAre(d + "h0", d + "h1", d + "-node0", d + "-node1",
                                               d + "br", Lock(kDead)));
  EXPECT_EQ(r->errors, 0);
  EXPECT_THAT(
      r->kept,
      ElementsAre(absl::StrCat(NetnsPrefix(kLive, 0), ": creator pid 43 lives"),
                  HasSubstr(absl::StrCat(NetnsPrefix(kHeld, 0), ": ", Lock(kHeld), " is held")),
                  HasSubstr(absl::StrCat(NetnsPrefix(kDetached, 0), ": detached"))));
  // Only removals of kDead's objects ran.
  for (const std::string& line : host_->commands) {
    if (line.find(" del ") == std::string::npos) continue;
    EXPECT_THAT(line, HasSubstr(d)) << line;
  }
  for (const std::string& l : foreign_links_) EXPECT_EQ(host_->links.count(l), 1u) << l;
  for (const std::string& n : foreign_netns_) EXPECT_EQ(host_->netns.count(n), 1u) << n;
  for (pid_t pid : {kLive, kHeld, kDetached}) {
    const std::string p = NetnsPrefix(pid, 0);
    EXPECT_EQ(host_->links.count(p + "br"), 1u) << p;
    EXPECT_EQ(host_->netns.count(p + "-node1"), 1u) << p;
  }
  EXPECT_FALSE(Exists(Lock(kDead)));
  EXPECT_TRUE(Exists(Lock(kDetached)));
  // Veths before namespaces before the bridge.
  std::vector<std::string> dels;
  for (const std::string& line : host_->commands) {
    if (line.find(" del ") != std::string::npos) dels.push_back(line);
  }
  ASSERT_EQ(dels.size(), 5u);
  EXPECT_THAT(dels[0], HasSubstr("ip link del " + d + "h"));
  EXPECT_THAT(dels[1], HasSubstr("ip link del " + d + "h"));
  EXPECT_THAT(dels[2], HasSubstr("ip netns del " + d + "-node"));
  EXPECT_THAT(dels[3], HasSubstr("ip netns del " + d + "-node"));
  EXPECT_EQ(dels[4], "ip link del " + d + "br");
}

TEST_F(CleanupTest, ALockFileAloneOfADeadCreatorIsRemovedAndOfALiveOneKept) {
  const pid_t lonely_dead = 0x5e;
  const pid_t lonely_live = 0x6f;
  host_->alive.insert(lonely_live);
  const std::string dead_lock = absl::StrCat(lock_dir_, "/", NetnsPrefix(lonely_dead, 3), ".lock");
  const std::string live_lock = absl::StrCat(lock_dir_, "/", NetnsPrefix(lonely_live, 0), ".lock");
  const std::string subnet_lock = absl::StrCat(lock_dir_, "/subnet.lock");
  for (const std::string& path : {dead_lock, live_lock, subnet_lock}) {
    ASSERT_TRUE(FileLock::Acquire(path).ok()) << path;
  }
  absl::StatusOr<NetnsCleanupReport> r = CleanupStaleNetns(host_, lock_dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(Exists(dead_lock));
  EXPECT_TRUE(Exists(live_lock));
  EXPECT_TRUE(Exists(subnet_lock));
}

TEST_F(CleanupTest, RemovalFailuresAreCountedAndTheLockFileKept) {
  const std::string d = NetnsPrefix(kDead, 0);
  host_->fail_on = "ip netns del " + d + "-node0";
  absl::StatusOr<NetnsCleanupReport> r = CleanupStaleNetns(host_, lock_dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->errors, 1);
  EXPECT_EQ(host_->netns.count(d + "-node0"), 1u);
  EXPECT_EQ(host_->netns.count(d + "-node1"), 0u);
}

TEST_F(CleanupTest, AFailedListingRemovesNothing) {
  host_->fail_on = "ip -j netns list";
  host_->fail_stderr = "boom";
  absl::StatusOr<NetnsCleanupReport> r = CleanupStaleNetns(host_, lock_dir_);
  EXPECT_THAT(r.status().message(), HasSubstr("`ip -j netns list` exited with code 2: boom"));
  for (const std::string& line : host_->commands)
    EXPECT_THAT(line, ::testing::Not(HasSubstr(" del ")));
}

ClusterSpec SpecOf(pid_t pid) {
  const std::string p = NetnsPrefix(pid, 0);
  ClusterSpec spec;
  spec.kind = ClusterKind::kNetns;
  spec.prefix = p;
  spec.bridge = p + "br";
  spec.subnet = "10.77.5.0/24";
  spec.controller_address = "10.77.5.254";
  for (int i = 0; i < 2; ++i) {
    NodeSpec n;
    n.name = absl::StrCat("node", i);
    n.netns = absl::StrCat(p, "-node", i);
    n.address = absl::StrCat("10.77.5.", i + 1);
    n.iface = "eth0";
    n.host_veth = absl::StrCat(p, "h", i);
    spec.nodes.push_back(n);
  }
  return spec;
}

TEST_F(CleanupTest, DestroyFromSpecRemovesADetachedCluster) {
  const std::string p = NetnsPrefix(kDetached, 0);
  absl::Status s = DestroyNetnsCluster(SpecOf(kDetached), host_, lock_dir_);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(host_->links.count(p + "br"), 0u);
  EXPECT_EQ(host_->links.count(p + "h1"), 0u);
  EXPECT_EQ(host_->netns.count(p + "-node0"), 0u);
  EXPECT_FALSE(Exists(Lock(kDetached)));
  EXPECT_EQ(host_->links.count(NetnsPrefix(kDead, 0) + "br"), 1u);
}

TEST_F(CleanupTest, DestroyFromSpecRefusesForeignNamesAndHeldClusters) {
  ClusterSpec spec = SpecOf(kDead);
  spec.nodes[1].host_veth = "eth0";
  absl::Status s = DestroyNetnsCluster(spec, host_, lock_dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nodes[1] (node1): host_veth 'eth0'"));
  spec = SpecOf(kDead);
  spec.nodes[0].netns = NetnsName(NetnsPrefix(kLive, 0), "node0");  // Another cluster's.
  EXPECT_EQ(DestroyNetnsCluster(spec, host_, lock_dir_).code(), absl::StatusCode::kInvalidArgument);
  spec = SpecOf(kDead);
  spec.bridge = "docker0";
  EXPECT_THAT(DestroyNetnsCluster(spec, host_, lock_dir_).message(),
              HasSubstr("bridge 'docker0' is not a Falcon bridge"));
  spec = SpecOf(kDead);
  spec.kind = ClusterKind::kLoopback;
  EXPECT_EQ(DestroyNetnsCluster(spec, host_, lock_dir_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(host_->commands, IsEmpty());

  absl::StatusOr<FileLock> held = FileLock::Acquire(Lock(kHeld));
  ASSERT_TRUE(held.ok());
  s = DestroyNetnsCluster(SpecOf(kHeld), host_, lock_dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("still held by its creator"));
  EXPECT_THAT(host_->commands, IsEmpty());
}

class CheckSupportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lock_dir_ = FreshDir();
    host_->files["/proc/self/status"] = "Name:\tx\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n";
    host_->files["/proc/self/uid_map"] = "         0          0 4294967295\n";
  }
  std::shared_ptr<FakeNetnsHost> host_ = std::make_shared<FakeNetnsHost>();
  std::string lock_dir_;
};

TEST_F(CheckSupportTest, OkWhenANamespaceAndABridgeCanBeMadeAndRemoved) {
  absl::Status s = CheckNetnsSupport(host_, lock_dir_);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(LockFiles(lock_dir_), IsEmpty());
  for (const std::string& l : host_->links) EXPECT_FALSE(ParseLinkName(l).has_value()) << l;
  EXPECT_THAT(host_->netns, IsEmpty());
}

TEST_F(CheckSupportTest, MissingCapabilitiesAreNamed) {
  host_->files["/proc/self/status"] = "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n";
  absl::Status s = CheckNetnsSupport(host_, lock_dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "creating network namespaces needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN; this "
            "process has uid 1000 without CAP_NET_ADMIN, CAP_SYS_ADMIN; use the loopback cluster");
}

TEST_F(CheckSupportTest, MissingIpIsNamed) {
  host_->missing_programs.insert("ip");
  absl::Status s = CheckNetnsSupport(host_, lock_dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("iproute2's `ip`; this process cannot run it"));
  EXPECT_THAT(s.message(), HasSubstr("use the loopback cluster"));
}

TEST_F(CheckSupportTest, AFailedAttemptQuotesIpAndNotesAUserNamespace) {
  host_->files["/proc/self/uid_map"] = "0 0 1\n";
  host_->fail_on = "ip netns add";
  host_->fail_stderr = "mount --make-shared /run/netns failed: Operation not permitted";
  absl::Status s = CheckNetnsSupport(host_, lock_dir_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("this process (uid 0) cannot: probe: `ip netns add fn"));
  EXPECT_THAT(s.message(), HasSubstr("Operation not permitted"));
  EXPECT_THAT(s.message(), HasSubstr("user namespace of its own, uid_map '0 0 1'"));
  EXPECT_THAT(s.message(), HasSubstr("tag the test no-sandbox"));
  EXPECT_THAT(LockFiles(lock_dir_), IsEmpty());
}

}  // namespace
}  // namespace falcon::cluster
