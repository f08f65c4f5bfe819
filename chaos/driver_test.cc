#include "chaos/driver.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "chaos/fake_runner.h"
#include "common/testing/log_capture.h"
#include "common/text_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kRank1Pid = 1001;

// A /proc/PID/stat line with niceness `nice` (field 19).
std::string Stat(int pid, int nice) {
  return absl::StrCat(pid, " (rank one) S 1 1 1 0 -1 4194304 0 0 0 0 7 3 0 0 20 ", nice,
                      " 1 0 100\n");
}
constexpr int kRank3Pid = 1003;

cluster::ClusterSpec ThreeNodes() {
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kNetns;
  c.prefix = "fnt";
  c.bridge = "fntbr";
  c.subnet = "10.77.3.0/24";
  c.controller_address = "10.77.3.254";
  for (int i = 0; i < 3; ++i) {
    c.nodes.push_back({absl::StrCat("node", i), absl::StrCat("fnt-node", i),
                       absl::StrCat("10.77.3.", i + 1), "eth0", absl::StrCat("fnth", i)});
  }
  return c;
}

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
    // cgroup v1 with every process in the root cgroup.
    fake_.SetFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    fake_.SetFile("/sys/fs/cgroup/cpu/cgroup.procs", "1\n1001\n1002\n1003\n");
    for (int pid : {1001, 1002, 1003}) {
      fake_.SetFile(absl::StrCat("/proc/", pid, "/status"),
                    "Name:\trank\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n");
      fake_.SetFile(absl::StrCat("/proc/", pid, "/cgroup"), "4:cpu,cpuacct:/\n0::/\n");
      fake_.SetFile(absl::StrCat("/proc/", pid, "/stat"), Stat(pid, 0));
    }
    fake_.SetFile("/proc/self/stat", Stat(777, 0));
    // Ranks 0, 1 on node0; 2, 3 on node1.
    WriteRanks(0, {1000, kRank1Pid, 1002, kRank3Pid});
  }

  void WriteRanks(int64_t generation, std::vector<int> pids) {
    cluster::RankTable t;
    t.generation = generation;
    for (int r = 0; r < static_cast<int>(pids.size()); ++r) {
      t.ranks.push_back({r, absl::StrCat("node", r / 2), pids[r]});
    }
    ASSERT_TRUE(cluster::WriteRankTable(ranks_path(), t).ok());
  }

  std::string ranks_path() const { return dir_ + "/ranks.json"; }
  std::string record_path() const { return dir_ + "/truth.json"; }

  std::unique_ptr<Driver> Make(cluster::ClusterSpec c = ThreeNodes()) {
    DriverOptions o;
    o.rank_table_path = ranks_path();
    o.record_path = record_path();
    o.driver_pid = 777;
    absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create(std::move(c), o, &fake_, &clock_);
    EXPECT_TRUE(d.ok()) << d.status();
    fake_.ClearLines();
    return d.ok() ? *std::move(d) : nullptr;
  }

  static FaultSpec Spec(const std::string& text) {
    absl::StatusOr<FaultSpec> s = ParseFaultSpec(text, 2);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : FaultSpec{};
  }

  Record ReadRecordFile() {
    absl::StatusOr<std::string> text = common::ReadTextFile(record_path());
    EXPECT_TRUE(text.ok()) << text.status();
    absl::StatusOr<Record> r = ParseRecord(text.ok() ? *text : "", record_path());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Record{};
  }

  std::string dir_;
  FakeRunner fake_;
  common::FakeClock clock_{absl::FromUnixMillis(1'700'000'000'000)};
};

TEST_F(DriverTest, LinkOneDirectionExactCommands) {
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit"), 120);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, 1);
  EXPECT_THAT(fake_.lines(),
              ElementsAre("run tc -n fnt-node0 qdisc add dev eth0 root handle fa1c: htb",
                          "run tc -n fnt-node0 class add dev eth0 parent fa1c: classid fa1c:1 htb "
                          "rate 8000000bit ceil 8000000bit burst 32768 cburst 32768",
                          "run tc -n fnt-node0 filter add dev eth0 parent fa1c: protocol ip prio 1 "
                          "u32 match ip dst 10.77.3.2/32 flowid fa1c:1"));
  EXPECT_EQ(log.Count("fault applied fault=1 kind=link target=node0->node1 did=htb root + class "
                      "fa1c:1 rate 8mbit burst 32768b + u32 filter dst 10.77.3.2 on "
                      "fnt-node0/eth0 iteration=120"),
            1);
  EXPECT_THAT(d->applied(), ElementsAre(1));
  fake_.ClearLines();
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(d->Remove(1, 410).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre("run tc -n fnt-node0 qdisc del dev eth0 root"));
  EXPECT_EQ(log.Count("fault removed fault=1 kind=link target=node0->node1 iteration=410"), 1);
  EXPECT_THAT(d->applied(), IsEmpty());

  const Record r = ReadRecordFile();
  EXPECT_EQ(r.driver_pid, 777);
  EXPECT_EQ(r.cluster_kind, "netns");
  EXPECT_EQ(r.cluster_prefix, "fnt");
  EXPECT_EQ(r.started_unix_ms, 1'700'000'000'000);
  ASSERT_EQ(r.faults.size(), 1u);
  const FaultRecord& f = r.faults[0];
  EXPECT_EQ(f.id, 1);
  EXPECT_EQ(f.spec, "link:src=node0,dst=node1,rate=8mbit");
  EXPECT_EQ(f.kind, FaultKind::kLink);
  EXPECT_EQ(f.applied_unix_ms, 1'700'000'000'000);
  EXPECT_EQ(f.applied_iteration, 120);
  EXPECT_EQ(f.removed_unix_ms, 1'700'000'030'000);
  EXPECT_EQ(f.removed_iteration, 410);
  EXPECT_EQ(f.error, "");
  EXPECT_EQ(f.target.src_node, "node0");
  EXPECT_EQ(f.target.dst_node, "node1");
  EXPECT_EQ(f.target.rate_bit_per_second, 8'000'000);
  ASSERT_EQ(f.target.shaped.size(), 1u);
  EXPECT_EQ(f.target.shaped[0].netns, "fnt-node0");
  EXPECT_EQ(f.target.shaped[0].iface, "eth0");
  EXPECT_EQ(f.target.shaped[0].dst_address, "10.77.3.2");
  EXPECT_EQ(f.target.shaped[0].handle, "fa1c:1");
}

TEST_F(DriverTest, LinkBothDirections) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node2,rate=2mbit,burst=64kb,both")).ok());
  EXPECT_THAT(fake_.Lines("run tc -n fnt-node0 filter"),
              ElementsAre(HasSubstr("match ip dst 10.77.3.3/32 flowid fa1c:1")));
  EXPECT_THAT(fake_.Lines("run tc -n fnt-node2"),
              ElementsAre("run tc -n fnt-node2 qdisc add dev eth0 root handle fa1c: htb",
                          "run tc -n fnt-node2 class add dev eth0 parent fa1c: classid fa1c:1 htb "
                          "rate 2000000bit ceil 2000000bit burst 65536 cburst 65536",
                          "run tc -n fnt-node2 filter add dev eth0 parent fa1c: protocol ip prio 1 "
                          "u32 match ip dst 10.77.3.1/32 flowid fa1c:1"));
  EXPECT_EQ(fake_.lines().size(), 6u);
  EXPECT_EQ(d->record().faults[0].target.shaped.size(), 2u);
  EXPECT_TRUE(d->record().faults[0].target.both);
  fake_.ClearLines();
  ASSERT_TRUE(d->Remove(1).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre("run tc -n fnt-node2 qdisc del dev eth0 root",
                                         "run tc -n fnt-node0 qdisc del dev eth0 root"));
}

TEST_F(DriverTest, LinksFromOneSenderShareItsHtb) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit")).ok());
  fake_.ClearLines();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node2,rate=4mbit")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("run tc -n fnt-node0 class add dev eth0 parent fa1c: classid fa1c:2 htb "
                          "rate 4000000bit ceil 4000000bit burst 32768 cburst 32768",
                          "run tc -n fnt-node0 filter add dev eth0 parent fa1c: protocol ip prio 2 "
                          "u32 match ip dst 10.77.3.3/32 flowid fa1c:2"));
  fake_.ClearLines();
  ASSERT_TRUE(d->Remove(1).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("run tc -n fnt-node0 filter del dev eth0 parent fa1c: protocol ip prio 1",
                          "run tc -n fnt-node0 class del dev eth0 classid fa1c:1"));
  // The freed slot is used again.
  fake_.ClearLines();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=1mbit")).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre(HasSubstr("classid fa1c:1 htb"), HasSubstr("prio 1")));
  fake_.ClearLines();
  ASSERT_TRUE(d->RemoveAll().ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("run tc -n fnt-node0 filter del dev eth0 parent fa1c: protocol ip prio 1",
                          "run tc -n fnt-node0 class del dev eth0 classid fa1c:1",
                          "run tc -n fnt-node0 qdisc del dev eth0 root"));
}

TEST_F(DriverTest, SameLinkTwiceIsRefused) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit")).ok());
  fake_.ClearLines();
  absl::StatusOr<int> id = d->Apply(Spec("link:src=node1,dst=node0,rate=1mbit,both"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(),
              HasSubstr("fault 2 (link:src=node1,dst=node0,rate=1mbit,both): the link "
                        "node0->node1 is already capped by fault 1 "
                        "(link:src=node0,dst=node1,rate=8mbit)"));
  EXPECT_THAT(fake_.lines(), IsEmpty());
  EXPECT_THAT(d->record().faults[1].error, HasSubstr("already capped by fault 1"));
  EXPECT_FALSE(d->record().faults[1].applied_unix_ms.has_value());
}

TEST_F(DriverTest, NicExactCommands) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("nic:node=node2,rate=5mbit")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("run tc -n fnt-node2 qdisc add dev eth0 root handle fa1c: tbf rate "
                          "5000000bit burst 32768 latency 100ms",
                          "run tc qdisc add dev fnth2 root handle fa1c: tbf rate 5000000bit burst "
                          "32768 latency 100ms"));
  const Target& t = d->record().faults[0].target;
  EXPECT_EQ(t.node, "node2");
  EXPECT_EQ(t.address, "10.77.3.3");
  ASSERT_EQ(t.shaped.size(), 2u);
  EXPECT_EQ(t.shaped[1].netns, "");
  EXPECT_EQ(t.shaped[1].iface, "fnth2");
  EXPECT_EQ(t.shaped[1].handle, "fa1c:");
  fake_.ClearLines();
  ASSERT_TRUE(d->Remove(1).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre("run tc qdisc del dev fnth2 root",
                                         "run tc -n fnt-node2 qdisc del dev eth0 root"));
}

TEST_F(DriverTest, NicAndLinkOnOneInterfaceAreRefusedBothWays) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("nic:node=node1,rate=5mbit")).ok());
  absl::StatusOr<int> link = d->Apply(Spec("link:src=node1,dst=node0,rate=1mbit"));
  EXPECT_EQ(link.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(link.status().message(),
              HasSubstr("interface fnt-node1/eth0 of node node1 already carries fault 1 "
                        "(nic:node=node1,rate=5mbit): a link cap and a NIC cap on one interface "
                        "do not compose; remove fault 1 first"));
  // A link *to* the degraded node uses the sender's interface: it composes.
  EXPECT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=1mbit")).ok());
  absl::StatusOr<int> nic = d->Apply(Spec("nic:node=node0,rate=5mbit"));
  EXPECT_THAT(nic.status().message(),
              HasSubstr("interface fnt-node0/eth0 of node node0 already carries fault 3 "
                        "(link:src=node0,dst=node1,rate=1mbit): a NIC cap and a link cap"));
  absl::StatusOr<int> again = d->Apply(Spec("nic:node=node1,rate=1mbit"));
  EXPECT_THAT(again.status().message(), HasSubstr("already carries fault 1"));
  EXPECT_THAT(d->applied(), ElementsAre(1, 3));
}

TEST_F(DriverTest, LinkByRanks) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("link:src_rank=1,dst_rank=3,rate=8mbit")).ok());
  EXPECT_THAT(fake_.Lines("run tc -n fnt-node0 filter"),
              ElementsAre(HasSubstr("match ip dst 10.77.3.2/32")));
  const Target& t = d->record().faults[0].target;
  EXPECT_EQ(t.src_node, "node0");
  EXPECT_EQ(t.dst_node, "node1");
  EXPECT_EQ(t.src_rank, 1);
  EXPECT_EQ(t.dst_rank, 3);

  absl::StatusOr<int> same = d->Apply(Spec("link:src_rank=2,dst_rank=3,rate=8mbit"));
  EXPECT_EQ(same.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(same.status().message(),
              HasSubstr("ranks 2 and 3 are both on node1: their traffic never leaves the node"));
  absl::StatusOr<int> mixed = d->Apply(Spec("link:src=node1,dst_rank=2,rate=8mbit"));
  EXPECT_THAT(mixed.status().message(), HasSubstr("node node1 and rank 2 are both on node1"));
  absl::StatusOr<int> unknown = d->Apply(Spec("link:src_rank=9,dst_rank=3,rate=8mbit"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("fault 4 (link:src_rank=9"));
}

TEST_F(DriverTest, UnknownNodesAndMissingRankTable) {
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("link:src=node0,dst=node7,rate=8mbit"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("node7"));
  EXPECT_THAT(d->Apply(Spec("nic:node=nodeX,rate=8mbit")).status().message(), HasSubstr("nodeX"));

  DriverOptions o;  // No rank table.
  absl::StatusOr<std::unique_ptr<Driver>> bare = Driver::Create(ThreeNodes(), o, &fake_, &clock_);
  ASSERT_TRUE(bare.ok());
  const FaultSpec rank_spec = Spec("compute:rank=1,quota=0.5");
  EXPECT_THAT((*bare)->Check(rank_spec).message(), HasSubstr("no rank table was given (--ranks)"));
  EXPECT_THAT((*bare)->Apply(rank_spec).status().message(), HasSubstr("no rank table"));
  EXPECT_TRUE((*bare)->Check(Spec("compute:pid=1001,quota=0.5")).ok());
}

TEST_F(DriverTest, LoopbackClusterRefusesShaping) {
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kLoopback;
  c.controller_address = "127.0.0.1";
  c.nodes = {{"node0", "", "127.0.0.1", "", ""}, {"node1", "", "127.0.0.1", "", ""}};
  std::unique_ptr<Driver> d = Make(c);
  const absl::Status s = d->Check(Spec("link:src=node0,dst=node1,rate=8mbit"));
  EXPECT_THAT(s.message(), HasSubstr("the cluster is loopback: nothing to shape"));
  EXPECT_THAT(d->Apply(Spec("nic:node=node0,rate=8mbit")).status().message(),
              HasSubstr("nothing to shape"));
  // Compute works there.
  EXPECT_TRUE(d->Apply(Spec("compute:rank=1,quota=0.5")).ok());
  EXPECT_THAT(fake_.Lines("mkdir"),
              ElementsAre("mkdir /sys/fs/cgroup/cpu/falcon-chaos.loopback.777.2"));
}

TEST_F(DriverTest, ComputeV1) {
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("compute:rank=1,quota=0.3,period=10ms"), 5);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(fake_.lines(),
              ElementsAre("mkdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_period_us 10000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_quota_us 3000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cgroup.procs 1001"));
  const Target& t = d->record().faults[0].target;
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.node, "node0");
  EXPECT_EQ(t.pid, kRank1Pid);
  EXPECT_EQ(t.rank_generation, 0);
  EXPECT_EQ(t.cgroup_version, 1);
  EXPECT_EQ(t.cgroup, "/sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1");
  EXPECT_EQ(t.origin_cgroup, "/");
  EXPECT_EQ(t.quota_us, 3000);
  EXPECT_EQ(t.period_us, 10000);
  EXPECT_DOUBLE_EQ(t.quota_cores, 0.3);

  absl::StatusOr<int> twice = d->Apply(Spec("compute:pid=1001,quota=0.5"));
  EXPECT_THAT(twice.status().message(), HasSubstr("process 1001 is already throttled by fault 1 "
                                                  "(compute:rank=1,quota=0.3,period=10ms)"));
  fake_.ClearLines();
  ASSERT_TRUE(d->Remove(1).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre("write /sys/fs/cgroup/cpu/cgroup.procs 1001",
                                         "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1"));
  EXPECT_EQ(d->record().faults[0].note, "");
}

// A /proc/PID/stat line with `utime` and `stime` clock ticks.
std::string StatTimes(int pid, int utime, int stime) {
  return absl::StrCat(pid, " (rank) R 1 1 1 0 -1 4194304 0 0 0 0 ", utime, " ", stime,
                      " 0 0 20 0 1 0 100\n");
}

TEST_F(DriverTest, ComputeBySlowdownMeasuresTheCpuUseFirst) {
  fake_.SetFile("/proc/1003/stat", StatTimes(1003, 100, 50));
  fake_.on_sleep = [&](absl::Duration d) {
    clock_.Advance(d);
    fake_.SetFile("/proc/1003/stat", StatTimes(1003, 170, 60));  // 0.8 CPU-seconds later.
  };
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=3,slowdown=2")).ok());
  EXPECT_THAT(
      fake_.lines(),
      ElementsAre("sleep 1s", "mkdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_period_us 100000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_quota_us 40000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cgroup.procs 1003"));
  const Target& t = d->record().faults[0].target;
  EXPECT_EQ(t.slowdown, 2);
  EXPECT_DOUBLE_EQ(*t.measured_cores, 0.8);
  EXPECT_DOUBLE_EQ(t.quota_cores, 0.4);
  EXPECT_EQ(t.quota_us, 40000);
  EXPECT_EQ(log.Count("(0.4 cores: it used 0.800, slowdown x2), process moved from /"), 1);
  // The record's applied time is after the measurement.
  EXPECT_EQ(*d->record().faults[0].applied_unix_ms, d->record().started_unix_ms + 1000);
}

// 0.02 cores / 4 = 0.005 cores: 0.5 ms per 100 ms period, below the kernel's 1 ms; the same
// share runs in a 200 ms period (1 ms per 200 ms).
TEST_F(DriverTest, AQuotaBelowTheKernelsMinimumRunsInALongerPeriod) {
  fake_.SetFile("/proc/1003/stat", StatTimes(1003, 100, 50));
  fake_.on_sleep = [&](absl::Duration d) {
    clock_.Advance(d);
    fake_.SetFile("/proc/1003/stat", StatTimes(1003, 101, 51));
  };
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=3,slowdown=4")).ok());
  EXPECT_THAT(
      fake_.Lines("write"),
      ElementsAre("write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_period_us 200000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_quota_us 1000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cgroup.procs 1003"));
  EXPECT_EQ(d->record().faults[0].target.period_us, 200000);
  EXPECT_EQ(log.Count("period 200ms, not 100ms: 0.0050 cores is below the kernel's 1 ms per 100ms"),
            1);
}

// 0.01 cores / 20 = 0.0005 cores: 1 ms of quota would need a 2 s period, past the kernel's 1 s.
TEST_F(DriverTest, AnIdleProcessCannotBeSlowedDownByAFactor) {
  fake_.SetFile("/proc/1003/stat", StatTimes(1003, 100, 50));
  fake_.on_sleep = [&](absl::Duration d) {
    clock_.Advance(d);
    fake_.SetFile("/proc/1003/stat", StatTimes(1003, 101, 50));
  };
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("compute:rank=3,slowdown=20"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(),
              HasSubstr("process 1003 used 0.010 cores over 1s: too idle to slow down by a factor "
                        "(0.0005 cores is below the kernel's 1 ms per period even in its longest "
                        "period, 1s"));
  EXPECT_THAT(fake_.Lines("mkdir"), IsEmpty());
  EXPECT_DOUBLE_EQ(*d->record().faults[0].target.measured_cores, 0.01);
}

TEST_F(DriverTest, ComputeV2) {
  FakeRunner v2;
  v2.SetFile("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  v2.SetFile("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n");
  v2.SetFile("/sys/fs/cgroup/system.slice/cgroup.procs", "1003\n");
  v2.SetFile("/proc/1003/status", "Cpus_allowed_list:\t0-1\n");
  v2.SetFile("/proc/1003/cgroup", "0::/system.slice\n");
  DriverOptions o;
  o.rank_table_path = ranks_path();
  o.driver_pid = 12;
  absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create(ThreeNodes(), o, &v2, &clock_);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Apply(Spec("compute:rank=3,quota=1.5")).ok());
  EXPECT_THAT(v2.lines(),
              ElementsAre("mkdir /sys/fs/cgroup/falcon-chaos.fnt.12.1",
                          "write /sys/fs/cgroup/falcon-chaos.fnt.12.1/cpu.max 150000 100000",
                          "write /sys/fs/cgroup/falcon-chaos.fnt.12.1/cgroup.procs 1003"));
  EXPECT_EQ((*d)->record().faults[0].target.cgroup_version, 2);
  v2.ClearLines();
  ASSERT_TRUE((*d)->Remove(1).ok());
  EXPECT_THAT(v2.lines(), ElementsAre("write /sys/fs/cgroup/system.slice/cgroup.procs 1003",
                                      "rmdir /sys/fs/cgroup/falcon-chaos.fnt.12.1"));
}

// Rank 3 (pid 1003) with threads "rank" (1003), "falcon-device" (1005) and "gloo" (1006), all in
// the root cgroup.
void AddThreads(FakeRunner& fake) {
  fake.SetFile("/sys/fs/cgroup/cpu/tasks", "1\n1003\n1005\n1006\n");
  const std::pair<int, const char*> threads[] = {
      {1003, "rank"}, {1005, "falcon-device"}, {1006, "gloo"}};
  for (const auto& [tid, name] : threads) {
    fake.SetFile(absl::StrCat("/proc/1003/task/", tid, "/comm"), absl::StrCat(name, "\n"));
    fake.SetFile(absl::StrCat("/proc/1003/task/", tid, "/cgroup"), "4:cpu,cpuacct:/\n0::/\n");
  }
}

TEST_F(DriverTest, ComputeOfOneThreadMovesOnlyItsThreads) {
  AddThreads(fake_);
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("compute:rank=3,thread=falcon-device,quota=0.05"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(
      fake_.lines(),
      ElementsAre("mkdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_period_us 100000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_quota_us 5000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/tasks 1005"));
  EXPECT_EQ(fake_.File("/sys/fs/cgroup/cpu/tasks"), "1\n1003\n1006\n");
  const Target& t = d->record().faults[0].target;
  EXPECT_EQ(t.thread, "falcon-device");
  EXPECT_THAT(t.tids, ElementsAre(1005));
  EXPECT_EQ(t.origin_cgroup, "/");
  EXPECT_EQ(log.Count("target=rank=3 pid=1003 thread=falcon-device"), 1);
  EXPECT_EQ(log.Count("threads 'falcon-device' (TIDs 1005) moved from /"), 1);
  const Record file = ReadRecordFile();
  EXPECT_THAT(file.faults[0].target.tids, ElementsAre(1005));
  fake_.ClearLines();
  ASSERT_TRUE(d->Remove(*id).ok());
  EXPECT_THAT(fake_.lines(), ElementsAre("write /sys/fs/cgroup/cpu/tasks 1005",
                                         "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1"));
  EXPECT_EQ(d->record().faults[0].note, "");
}

TEST_F(DriverTest, ComputeOfOneThreadBySlowdownMeasuresThatThreadOnly) {
  AddThreads(fake_);
  fake_.SetFile("/proc/1003/stat", StatTimes(1003, 100, 50));
  fake_.SetFile("/proc/1003/task/1005/schedstat", "1000000000 0 0\n");
  fake_.SetFile("/proc/1003/task/1006/schedstat", "5000000000 0 0\n");
  fake_.on_sleep = [&](absl::Duration d) {
    clock_.Advance(d);
    fake_.SetFile("/proc/1003/stat", StatTimes(1003, 250, 60));           // 1.6 cores.
    fake_.SetFile("/proc/1003/task/1005/schedstat", "1600000000 0 0\n");  // 0.6 cores.
    fake_.SetFile("/proc/1003/task/1006/schedstat", "5900000000 0 0\n");  // 0.9 cores.
  };
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=3,thread=falcon-device,slowdown=2")).ok());
  const Target& t = d->record().faults[0].target;
  EXPECT_DOUBLE_EQ(*t.measured_cores, 0.6);
  EXPECT_DOUBLE_EQ(t.quota_cores, 0.3);
  EXPECT_EQ(t.quota_us, 30000);
  EXPECT_THAT(
      fake_.Lines("write"),
      ElementsAre("write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_period_us 100000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cpu.cfs_quota_us 30000",
                  "write /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/tasks 1005"));
  // An idle device thread is refused, naming it.
  ASSERT_TRUE(d->Remove(1).ok());
  fake_.on_sleep = [&](absl::Duration d) { clock_.Advance(d); };
  absl::StatusOr<int> idle = d->Apply(Spec("compute:rank=3,thread=falcon-device,slowdown=2"));
  EXPECT_EQ(idle.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(idle.status().message(),
              HasSubstr("the threads 'falcon-device' of process 1003 used 0.000 cores over 1s"));
}

TEST_F(DriverTest, ComputeOfAThreadThatDoesNotExist) {
  AddThreads(fake_);
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("compute:rank=3,thread=falcon-dev,slowdown=2"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(id.status().message(),
              HasSubstr("process 1003 has no thread named 'falcon-dev' (its threads: 'rank' (TID "
                        "1003), 'falcon-device' (TID 1005), 'gloo' (TID 1006))"));
  EXPECT_THAT(fake_.lines(), IsEmpty());  // Not even the measurement.
  EXPECT_THAT(d->record().faults[0].error, HasSubstr("has no thread named 'falcon-dev'"));
}

TEST_F(DriverTest, ComputeOfAThreadThatEndsIsRemovedWithANote) {
  AddThreads(fake_);
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=3,thread=falcon-device,quota=0.5")).ok());
  fake_.RemoveTree("/proc/1003/task/1005");
  fake_.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/tasks", "");
  EXPECT_TRUE(d->Remove(1).ok());
  EXPECT_EQ(d->record().faults[0].note, "thread 1005 of process 1003 had ended");
  EXPECT_EQ(d->record().faults[0].error, "");
  EXPECT_FALSE(fake_.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1"));
}

TEST_F(DriverTest, ComputeOfOneThreadIsRefusedOnCgroupV2) {
  FakeRunner v2;
  v2.SetFile("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  v2.SetFile("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n");
  v2.SetFile("/sys/fs/cgroup/system.slice/cgroup.procs", "1003\n");
  v2.SetFile("/proc/1003/status", "Cpus_allowed_list:\t0-1\n");
  v2.SetFile("/proc/1003/cgroup", "0::/system.slice\n");
  v2.SetFile("/proc/1003/task/1005/comm", "falcon-device\n");
  DriverOptions o;
  o.rank_table_path = ranks_path();
  o.driver_pid = 12;
  absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create(ThreeNodes(), o, &v2, &clock_);
  ASSERT_TRUE(d.ok());
  v2.ClearLines();
  absl::StatusOr<int> id = (*d)->Apply(Spec("compute:rank=3,thread=falcon-device,slowdown=2"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("(thread=) needs cgroup v1"));
  EXPECT_THAT(v2.lines(), IsEmpty());
}

TEST_F(DriverTest, ComputeOfAProcessThatDiesIsRemovedWithANote) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=3,quota=0.5")).ok());
  fake_.RemoveFile("/proc/1003/status");
  fake_.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1/cgroup.procs", "");
  EXPECT_TRUE(d->Remove(1).ok());
  EXPECT_EQ(d->record().faults[0].note, "process 1003 had exited");
  EXPECT_EQ(d->record().faults[0].error, "");
  EXPECT_FALSE(fake_.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fnt.777.1"));
  // Applying to a process that is gone fails.
  absl::StatusOr<int> gone = d->Apply(Spec("compute:rank=3,quota=0.5"));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("process 1003 (rank 3) does not exist"));
}

TEST_F(DriverTest, RankTableIsReadAgainAtEveryApply) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("compute:rank=1,quota=0.5")).ok());
  EXPECT_EQ(d->record().faults[0].target.pid, kRank1Pid);
  // The launcher restarted the job: rank 1 is another process now.
  fake_.SetFile("/proc/2001/status", "Cpus_allowed_list:\t1\n");
  fake_.SetFile("/proc/2001/stat", Stat(2001, 0));
  WriteRanks(1, {2000, 2001, 2002, 2003});
  fake_.ClearLines();
  ASSERT_TRUE(d->Apply(Spec("contention:rank=1,workers=2")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("spawn stress-ng --cpu 2 --taskset 1 --timeout 0 --quiet"));
  const Target& t = d->record().faults[1].target;
  EXPECT_EQ(t.pid, 2001);
  EXPECT_EQ(t.rank_generation, 1);
  EXPECT_EQ(t.cpus, "1");
  EXPECT_EQ(t.workers, 2);
  EXPECT_EQ(t.stress_pid, 50000);
}

TEST_F(DriverTest, ContentionStartsAndStopsStressNg) {
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("contention:pid=1002")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("spawn stress-ng --cpu 1 --taskset 0-1 --timeout 0 --quiet"));
  EXPECT_THAT(fake_.running(), ElementsAre(50000));
  EXPECT_EQ(log.Count("fault applied fault=1 kind=contention target=pid=1002 did=stress-ng pid "
                      "50000 with 1 CPU worker(s) on CPUs 0-1 at nice 0"),
            1);
  // Contention faults stack.
  ASSERT_TRUE(d->Apply(Spec("contention:pid=1002")).ok());
  ASSERT_TRUE(d->Remove(1).ok());
  EXPECT_THAT(fake_.running(), ElementsAre(50001));
  fake_.FailSpawn(absl::NotFoundError("cannot execute 'stress-ng': No such file or directory"));
  absl::StatusOr<int> failed = d->Apply(Spec("contention:pid=1002"));
  EXPECT_THAT(failed.status().message(),
              HasSubstr("fault 3 (contention:pid=1002): cannot execute 'stress-ng': No such file "
                        "or directory (contention needs stress-ng: the Debian package stress-ng)"));
}

TEST_F(DriverTest, ContentionRunsAtTheProcesssNiceness) {
  // The driver runs niced (as under `nice -n 19`); the rank does not.
  fake_.SetFile("/proc/self/stat", Stat(777, 19));
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("contention:pid=1002")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("spawn nice -n -19 stress-ng --cpu 1 --taskset 0-1 --timeout 0 --quiet"));
  EXPECT_EQ(d->record().faults[0].target.nice, 0);
  fake_.SetFile("/proc/1003/stat", Stat(1003, 5));
  fake_.SetFile("/proc/self/stat", Stat(777, 0));
  fake_.ClearLines();
  ASSERT_TRUE(d->Apply(Spec("contention:pid=1003,workers=3")).ok());
  EXPECT_THAT(fake_.lines(),
              ElementsAre("spawn nice -n 5 stress-ng --cpu 3 --taskset 0-1 --timeout 0 --quiet"));
  EXPECT_EQ(d->record().faults[1].target.nice, 5);
  fake_.SetFile("/proc/1003/stat", "garbage");
  EXPECT_THAT(d->Apply(Spec("contention:pid=1003")).status().message(),
              HasSubstr("/proc/1003/stat: no niceness in 'garbage'"));
}

TEST_F(DriverTest, DestructorRemovesEverything) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit")).ok());
  ASSERT_TRUE(d->Apply(Spec("nic:node=node2,rate=5mbit")).ok());
  ASSERT_TRUE(d->Apply(Spec("compute:rank=1,quota=0.5")).ok());
  ASSERT_TRUE(d->Apply(Spec("contention:rank=3")).ok());
  fake_.ClearLines();
  d.reset();
  EXPECT_THAT(fake_.lines(), ElementsAre("stop 50000", "write /sys/fs/cgroup/cpu/cgroup.procs 1001",
                                         "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fnt.777.3",
                                         "run tc qdisc del dev fnth2 root",
                                         "run tc -n fnt-node2 qdisc del dev eth0 root",
                                         "run tc -n fnt-node0 qdisc del dev eth0 root"));
  EXPECT_THAT(fake_.running(), IsEmpty());
  const Record r = ReadRecordFile();
  ASSERT_EQ(r.faults.size(), 4u);
  for (const FaultRecord& f : r.faults) {
    EXPECT_TRUE(f.removed_unix_ms.has_value()) << f.id;
    EXPECT_FALSE(f.removed_iteration.has_value());
  }
}

TEST_F(DriverTest, FailingTcLeavesNothingAndReportsStderr) {
  fake_.OnRun("tc -n fnt-node0 class add", {2, "", "Error: Specified class not found.\n"});
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit"));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(),
              HasSubstr("fault 1 (link:src=node0,dst=node1,rate=8mbit): tc -n fnt-node0 class add "
                        "dev eth0 parent fa1c: classid fa1c:1 htb rate 8000000bit ceil "
                        "8000000bit burst 32768 cburst 32768: exit 2: Error: Specified class not "
                        "found."));
  EXPECT_THAT(fake_.lines().back(), "run tc -n fnt-node0 qdisc del dev eth0 root");
  EXPECT_THAT(d->applied(), IsEmpty());
  EXPECT_THAT(ReadRecordFile().faults[0].error, HasSubstr("exit 2: Error: Specified class"));
}

TEST_F(DriverTest, BothDirectionsRollBackWhenTheSecondFails) {
  fake_.OnRun("tc -n fnt-node1 qdisc add", {2, "", "Error: Exclusivity flag on, cannot modify.\n"});
  std::unique_ptr<Driver> d = Make();
  absl::StatusOr<int> id = d->Apply(Spec("link:src=node0,dst=node1,rate=8mbit,both"));
  EXPECT_THAT(id.status().message(),
              HasSubstr("Exclusivity flag on, cannot modify. (the interface has a root qdisc "
                        "already; if an earlier driver left it: falcon chaos clear"));
  EXPECT_EQ(fake_.lines().back(), "run tc -n fnt-node0 qdisc del dev eth0 root");
  // The interface is free again.
  fake_.OnRun("tc -n fnt-node1 qdisc add", {});
  EXPECT_TRUE(d->Apply(Spec("nic:node=node0,rate=1mbit")).ok());
}

TEST_F(DriverTest, RemovalOfWhatIsAlreadyGoneIsNoError) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("nic:node=node2,rate=5mbit")).ok());
  ASSERT_TRUE(d->Apply(Spec("link:src=node0,dst=node1,rate=5mbit")).ok());
  // The harness tore node2 down; someone ran `clear` on node0.
  fake_.OnRun("tc -n fnt-node2", {1, "",
                                  "Cannot open network namespace \"fnt-node2\": No such "
                                  "file or directory\n"});
  fake_.OnRun("tc qdisc del dev fnth2", {1, "", "Cannot find device \"fnth2\"\n"});
  fake_.OnRun("tc -n fnt-node0 qdisc del",
              {2, "", "Error: Cannot delete qdisc with handle of zero.\n"});
  EXPECT_TRUE(d->RemoveAll().ok());
  EXPECT_EQ(d->record().faults[0].note,
            "interface fnth2 is gone; interface fnt-node2/eth0 is gone");
  EXPECT_EQ(d->record().faults[1].note, "the qdisc on fnt-node0/eth0 was already removed");
}

TEST_F(DriverTest, FailedRemovalIsReportedAndRecorded) {
  std::unique_ptr<Driver> d = Make();
  ASSERT_TRUE(d->Apply(Spec("nic:node=node2,rate=5mbit")).ok());
  fake_.OnRun("tc qdisc del dev fnth2", {2, "", "Error: something odd.\n"});
  fake_.OnRun("tc qdisc show dev fnth2", {0, "qdisc tbf fa1c: root refcnt 2 rate 5Mbit\n", ""});
  const absl::Status s = d->Remove(1, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("fault 1 (nic:node=node2,rate=5mbit): removal: tc qdisc del "
                                     "dev fnth2 root: exit 2: Error: something odd. (falcon chaos "
                                     "clear --cluster CLUSTER.json removes what is left)"));
  EXPECT_THAT(d->applied(), IsEmpty());
  EXPECT_EQ(d->record().faults[0].removed_iteration, 9);
  EXPECT_THAT(d->record().faults[0].error, HasSubstr("removal: tc qdisc del dev fnth2 root"));
  EXPECT_TRUE(d->Remove(1).ok());  // Not applied any more: nothing to do.
  EXPECT_EQ(d->Remove(5).code(), absl::StatusCode::kNotFound);
}

TEST_F(DriverTest, CreateRemovesCgroupsOfDeadDrivers) {
  fake_.AddDir("/sys/fs/cgroup/cpu/falcon-chaos.old.4444.1");
  fake_.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.old.4444.1/cgroup.procs", "1003\n");
  fake_.AddDir("/sys/fs/cgroup/cpu/falcon-chaos.old.1001.1");  // Its driver (pid 1001) lives.
  fake_.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.old.1001.1/cgroup.procs", "");
  common::testing::LogCapture log;
  std::unique_ptr<Driver> d = Make();
  EXPECT_FALSE(fake_.Exists("/sys/fs/cgroup/cpu/falcon-chaos.old.4444.1"));
  EXPECT_TRUE(fake_.Exists("/sys/fs/cgroup/cpu/falcon-chaos.old.1001.1"));
  EXPECT_EQ(
      log.Count("stale chaos cgroup removed cgroup=/sys/fs/cgroup/cpu/falcon-chaos.old.4444.1"), 1);
}

TEST_F(DriverTest, CreateFailsWhenTheRecordCannotBeWritten) {
  DriverOptions o;
  o.record_path = dir_ + "/no/such/dir/truth.json";
  absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create(ThreeNodes(), o, &fake_, &clock_);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(d.status().message(), HasSubstr("no/such/dir/truth.json"));
}

}  // namespace
}  // namespace falcon::chaos
