// falcon_chaos end to end without root: flag and spec errors, and the schedule of contention
// faults on a loopback cluster with a stand-in for stress-ng (a script that sleeps), so that the
// repeated --fault flag, the schedule, the signal handling and the record are checked anywhere.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chaos/record.h"
#include "cluster/cluster_spec.h"
#include "common/subprocess.h"
#include "common/testing/run_binary.h"
#include "common/text_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::HasSubstr;

std::string Binary() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/chaos/falcon_chaos");
}

class ChaosMainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
    cluster::ClusterSpec c;
    c.kind = cluster::ClusterKind::kLoopback;
    c.controller_address = "127.0.0.1";
    c.nodes = {{"node0", "", "127.0.0.1", "", ""}};
    ASSERT_TRUE(cluster::WriteClusterSpec(cluster(), c).ok());
    std::ofstream(fake_stress()) << "#!/bin/sh\nexec sleep 600\n";
    ASSERT_EQ(chmod(fake_stress().c_str(), 0755), 0);
  }
  std::string cluster() const { return dir_ + "/cluster.json"; }
  std::string record() const { return dir_ + "/truth.json"; }
  std::string fake_stress() const { return dir_ + "/fake-stress-ng"; }

  common::testing::BinaryRun Run(std::vector<std::string> args) {
    args.insert(args.begin(), Binary());
    absl::StatusOr<common::testing::BinaryRun> r = common::testing::RunBinary(args);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : common::testing::BinaryRun{};
  }

  // Runs a contention fault, sends `signal` once it is applied, and checks the driver removed it
  // and exited 0.
  void StopsCleanlyOn(int signal);

  Record ReadRecord() {
    absl::StatusOr<std::string> text = common::ReadTextFile(record());
    if (!text.ok()) return {};
    absl::StatusOr<Record> r = ParseRecord(*text, record());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Record{};
  }

  std::string dir_;
};

TEST_F(ChaosMainTest, FlagErrors) {
  common::testing::BinaryRun r = Run({});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("--cluster is required"));
  r = Run({"--cluster=" + dir_ + "/missing.json"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("missing.json"));
  r = Run({"--cluster", cluster(), "--record", record()});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("no --fault given"));
  r = Run({"--cluster", cluster(), "--fault", "contention:pid=1"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("--record is required"));
  r = Run({"--cluster", cluster(), "--record", record(), "--fault"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("--fault needs a value"));
  r = Run({"--cluster", cluster(), "frobnicate"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("unexpected argument 'frobnicate'"));
}

TEST_F(ChaosMainTest, HelpListsTheFlags) {
  const common::testing::BinaryRun r = Run({"--help"});
  EXPECT_EQ(r.status.code(), 0) << r.output();
  EXPECT_THAT(r.output(), HasSubstr("--fault (a fault spec (repeat the flag for several"));
  EXPECT_THAT(r.output(), HasSubstr("--record"));
  // Every key the driver takes (break-it trial: slowdown=, thread= and src_rank= were missing).
  for (const char* key : {"src_rank=R", "slowdown=F", "thread=NAME", "period=D", "burst=B"}) {
    EXPECT_THAT(r.output(), HasSubstr(key));
  }
}

TEST_F(ChaosMainTest, SpecErrorsNameTheField) {
  common::testing::BinaryRun r =
      Run({"--cluster", cluster(), "--record", record(), "--fault=contention:pid=1", "--fault",
           "link:src=node0,dst=node1,rate=0mbit"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("--fault: fault 'link:src=node0,dst=node1,rate=0mbit': rate: "
                               "'0mbit' is outside [1kbit, 100gbit]"));
  // Valid syntax the cluster cannot take: refused before anything is applied.
  r = Run({"--cluster", cluster(), "--record", record(), "--fault",
           "link:src=node0,dst=node1,rate=8mbit"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("the cluster is loopback: nothing to shape"));
  r = Run({"--cluster", cluster(), "--record", record(), "--fault", "compute:rank=1,quota=0.5"});
  EXPECT_EQ(r.status.code(), 2);
  EXPECT_THAT(r.err, HasSubstr("no rank table was given (--ranks)"));
}

TEST_F(ChaosMainTest, RunsTheScheduleToItsEndAndRecordsIt) {
  const std::string pid = absl::StrCat(getpid());
  common::testing::BinaryRun r =
      Run({"--cluster", cluster(), "--record", record(), "--stress_ng", fake_stress(), "--fault",
           "contention:pid=" + pid + ",until=0.3", "--fault",
           "contention:pid=" + pid + ",workers=2,from=0.2,until=0.6"});
  EXPECT_EQ(r.status.code(), 0) << r.output();
  EXPECT_THAT(r.out, HasSubstr("2 fault(s) recorded in " + record()));
  EXPECT_THAT(r.err, HasSubstr("fault applied fault=1 kind=contention"));
  EXPECT_THAT(r.err, HasSubstr("fault removed fault=2 kind=contention"));
  EXPECT_THAT(r.err, HasSubstr("every fault has ended"));
  const Record rec = ReadRecord();
  ASSERT_EQ(rec.faults.size(), 2u);
  const FaultRecord& a = rec.faults[0];
  const FaultRecord& b = rec.faults[1];
  EXPECT_EQ(a.spec, "contention:pid=" + pid + ",until=0.3");
  EXPECT_EQ(b.target.workers, 2);
  ASSERT_TRUE(a.applied_unix_ms && a.removed_unix_ms && b.applied_unix_ms && b.removed_unix_ms);
  // The schedule's order (not its durations: the machine may be slow).
  EXPECT_LE(rec.started_unix_ms, *a.applied_unix_ms);
  EXPECT_LE(*a.applied_unix_ms, *b.applied_unix_ms);
  EXPECT_LE(*b.applied_unix_ms, *b.removed_unix_ms);
  EXPECT_GE(*a.removed_unix_ms - rec.started_unix_ms, 300);
  EXPECT_GE(*b.applied_unix_ms - rec.started_unix_ms, 200);
  EXPECT_GE(*b.removed_unix_ms - rec.started_unix_ms, 600);
  EXPECT_EQ(a.error, "");
  // The stand-ins were stopped.
  for (const FaultRecord& f : rec.faults) {
    EXPECT_NE(kill(f.target.stress_pid, 0), 0) << f.target.stress_pid;
  }
}

// SIGTERM, and SIGHUP (a closed terminal or SSH session; before, it killed the driver and left
// its qdiscs and cgroups behind).
void ChaosMainTest::StopsCleanlyOn(int signal) {
  common::SpawnOptions o;
  o.argv = {Binary(),      "--cluster", cluster(),
            "--record",    record(),    "--stress_ng",
            fake_stress(), "--fault",   absl::StrCat("contention:pid=", getpid())};
  o.stdout_stream = common::Stdio::Null();
  o.stderr_stream = common::Stdio::Null();
  absl::StatusOr<common::Subprocess> p = common::Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok()) << p.status();
  // Wait (bounded) until the fault is applied.
  Record rec;
  for (int i = 0; i < 3000; ++i) {
    rec = ReadRecord();
    if (!rec.faults.empty() && rec.faults[0].applied_unix_ms.has_value()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(rec.faults.size(), 1u);
  ASSERT_TRUE(rec.faults[0].applied_unix_ms.has_value());
  EXPECT_EQ(kill(rec.faults[0].target.stress_pid, 0), 0);
  ASSERT_TRUE(p->Signal(signal).ok());
  absl::StatusOr<common::ExitStatus> exit = p->Wait();
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->ShellCode(), 0);
  rec = ReadRecord();
  ASSERT_EQ(rec.faults.size(), 1u);
  EXPECT_TRUE(rec.faults[0].removed_unix_ms.has_value());
  EXPECT_NE(kill(rec.faults[0].target.stress_pid, 0), 0);
}

TEST_F(ChaosMainTest, SigtermRemovesEverythingAndExitsZero) { StopsCleanlyOn(SIGTERM); }

TEST_F(ChaosMainTest, SighupRemovesEverythingAndExitsZero) { StopsCleanlyOn(SIGHUP); }

}  // namespace
}  // namespace falcon::chaos
