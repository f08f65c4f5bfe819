#include "chaos/clear.h"

#include "chaos/fake_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

cluster::ClusterSpec TwoNodes() {
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kNetns;
  c.prefix = "fnc";
  c.controller_address = "10.9.0.254";
  c.nodes = {{"node0", "fnc-node0", "10.9.0.1", "eth0", "fnch0"},
             {"node1", "fnc-node1", "10.9.0.2", "eth0", "fnch1"}};
  return c;
}

TEST(ClearTest, RemovesOnlyChaosQdiscsAndCgroups) {
  FakeRunner fake;
  fake.OnRun("tc -n fnc-node0 qdisc show dev eth0 root",
             {0, "qdisc htb fa1c: root refcnt 3 r2q 10 default 0\n", ""});
  fake.OnRun("tc qdisc show dev fnch0 root", {0, "qdisc noqueue 0: root refcnt 2\n", ""});
  fake.OnRun("tc -n fnc-node1 qdisc show dev eth0 root",
             {0, "qdisc tbf 8001: root refcnt 2 rate 1Mbit\n", ""});  // Someone else's.
  fake.OnRun("tc qdisc show dev fnch1 root", {0, "qdisc tbf fa1c: root refcnt 2 rate 1Mbit\n", ""});
  fake.SetFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  fake.SetFile("/sys/fs/cgroup/cpu/cgroup.procs", "1\n");
  fake.SetFile("/proc/500/status", "");  // A live driver of another cluster.
  fake.SetFile("/proc/42/status", "");
  fake.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.fnc.500.1/cgroup.procs", "42\n");  // Ours.
  fake.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.other.500.1/cgroup.procs", "");    // Live other.
  fake.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.other.600.2/cgroup.procs", "");    // Dead other.
  fake.SetFile("/sys/fs/cgroup/cpu/user.slice/cgroup.procs", "");

  const ClearReport report = ClearCluster(TwoNodes(), &fake);
  EXPECT_THAT(report.removed, ElementsAre("qdisc fa1c: on fnc-node0/eth0", "qdisc fa1c: on fnch1",
                                          "cgroup /sys/fs/cgroup/cpu/falcon-chaos.fnc.500.1",
                                          "cgroup /sys/fs/cgroup/cpu/falcon-chaos.other.600.2"));
  EXPECT_THAT(report.errors, IsEmpty());
  EXPECT_THAT(fake.Lines("run tc -n fnc-node0 qdisc del"),
              ElementsAre("run tc -n fnc-node0 qdisc del dev eth0 root"));
  EXPECT_THAT(fake.Lines("run tc -n fnc-node1 qdisc del"), IsEmpty());
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/cgroup.procs"), "1\n42\n");
  EXPECT_TRUE(fake.Exists("/sys/fs/cgroup/cpu/falcon-chaos.other.500.1"));
  EXPECT_TRUE(fake.Exists("/sys/fs/cgroup/cpu/user.slice"));
}

TEST(ClearTest, GoneInterfacesAreNotesAndFailuresAreErrors) {
  FakeRunner fake;
  fake.OnRun("tc -n fnc-node0",
             {1, "", "Cannot open network namespace \"fnc-node0\": No such file or directory\n"});
  fake.OnRun("tc qdisc show dev fnch0 root", {1, "", "Cannot find device \"fnch0\"\n"});
  fake.OnRun("tc qdisc show dev fnch1 root", {0, "qdisc tbf fa1c: root refcnt 2\n", ""});
  fake.OnRun("tc qdisc del dev fnch1 root", {2, "", "Error: odd.\n"});
  const ClearReport report = ClearCluster(TwoNodes(), &fake);
  EXPECT_THAT(report.notes, ElementsAre("interface fnc-node0/eth0 of node node0 is gone",
                                        "interface fnch0 of node node0 is gone",
                                        "no cgroups looked at: no cgroup cpu controller: neither "
                                        "/sys/fs/cgroup/cgroup.controllers (v2) nor "
                                        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us (v1) exists"));
  EXPECT_THAT(report.errors, ElementsAre("tc qdisc del dev fnch1 root: exit 2: Error: odd."));
  EXPECT_THAT(report.removed, IsEmpty());
}

TEST(ClearTest, IsIdempotent) {
  FakeRunner fake;
  const ClearReport report = ClearCluster(TwoNodes(), &fake);
  EXPECT_THAT(report.removed, IsEmpty());
  EXPECT_THAT(report.errors, IsEmpty());
  EXPECT_THAT(fake.Lines("run tc"), ElementsAre("run tc -n fnc-node0 qdisc show dev eth0 root",
                                                "run tc qdisc show dev fnch0 root",
                                                "run tc -n fnc-node1 qdisc show dev eth0 root",
                                                "run tc qdisc show dev fnch1 root"));
}

}  // namespace
}  // namespace falcon::chaos
