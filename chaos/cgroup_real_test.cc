// Real compute faults (root): a CPU quota on a busy process or on one named thread of it, and
// stress-ng contention next to one.
// Assertions compare CPU shares of the same process before and during the fault, with generous
// margins, so that a loaded machine only makes them looser.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "chaos/cgroup.h"
#include "chaos/driver.h"
#include "chaos/proc_threads.h"
#include "chaos/real_test_util.h"
#include "chaos/runner.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/skip.h"

namespace falcon::chaos {
namespace {

using ::testing::HasSubstr;

cluster::ClusterSpec Loopback() {
  cluster::ClusterSpec c;
  c.kind = cluster::ClusterKind::kLoopback;
  c.controller_address = "127.0.0.1";
  c.nodes = {{"node0", "", "127.0.0.1", "", ""}};
  return c;
}

std::string Read(Runner& runner, const std::string& path) {
  absl::StatusOr<std::string> s = runner.ReadFile(path);
  return s.ok() ? *s : "";
}

// Pids whose parent is `ppid` (/proc/*/stat field 4).
std::vector<int> Children(Runner& runner, int ppid) {
  std::vector<int> out;
  absl::StatusOr<std::vector<std::string>> names = runner.ListDir("/proc");
  if (!names.ok()) return out;
  for (const std::string& name : *names) {
    int pid = 0;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    const std::string stat = Read(runner, absl::StrCat("/proc/", pid, "/stat"));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    const std::string fields = stat.substr(paren + 2);  // "S PPID ..."
    std::vector<absl::string_view> f = absl::StrSplit(fields, ' ');
    int parent = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &parent) && parent == ppid) out.push_back(pid);
  }
  return out;
}

// Running: it exists and is no zombie (an orphan's zombie may linger where pid 1 does not reap).
bool Alive(int pid) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  const std::string stat = Read(*runner, absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Waits (bounded) until `pid` is gone; true when it is.
bool AwaitGone(int pid) {
  for (int i = 0; i < 500 && Alive(pid); ++i) absl::SleepFor(absl::Milliseconds(20));
  return !Alive(pid);
}

class CgroupRealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) FALCON_SKIP_OR_FAIL("not root: cgroup files need root");
    runner_ = NewRealRunner();
    absl::StatusOr<CgroupHierarchy> h = DetectCgroupHierarchy(runner_.get(), "/sys/fs/cgroup");
    if (!h.ok()) FALCON_SKIP_OR_FAIL(std::string(h.status().message()));
    if (access(h->root.c_str(), W_OK) != 0) {
      FALCON_SKIP_OR_FAIL(h->root +
                          " is not writable here (in Bazel's sandbox? the test needs the "
                          "tag no-sandbox)");
    }
    hierarchy_ = *h;
  }
  std::unique_ptr<Runner> runner_;
  CgroupHierarchy hierarchy_;
  common::RealClock clock_;
};

TEST_F(CgroupRealTest, QuotaThrottlesABusyProcessAndRemovalRestoresIt) {
  absl::StatusOr<common::Subprocess> busy = SpawnBusyLoop();
  ASSERT_TRUE(busy.ok()) << busy.status();
  const int pid = busy->pid();
  Cgroups cgroups(runner_.get(), hierarchy_);
  absl::StatusOr<std::string> origin = cgroups.CgroupOf(pid);
  ASSERT_TRUE(origin.ok()) << origin.status();

  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(Loopback(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok()) << driver.status();
  absl::StatusOr<double> before = CpuShare(pid, absl::Seconds(2));
  ASSERT_TRUE(before.ok()) << before.status();

  absl::StatusOr<int> id =
      (*driver)->Apply(*ParseFaultSpec(absl::StrCat("compute:pid=", pid, ",quota=0.05"), 2));
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string cgroup = (*driver)->record().faults[0].target.cgroup;
  EXPECT_TRUE(runner_->Exists(cgroup));
  EXPECT_THAT(Read(*runner_, cgroup + "/cgroup.procs"), HasSubstr(absl::StrCat(pid)));
  absl::StatusOr<double> during = CpuShare(pid, absl::Seconds(2));
  ASSERT_TRUE(during.ok()) << during.status();

  ASSERT_TRUE((*driver)->Remove(*id).ok());
  std::printf("CPU share: before %.3f, during quota 0.05 %.3f, ratio %.3f\n", *before, *during,
              *during / *before);
  // The quota is a ceiling whatever the load: 0.05 CPU plus accounting granularity (a 2 s window
  // may hold 21 periods, and utime/stime tick at 10 ms). So small a quota keeps the ratio below
  // 0.5 even when other load leaves the busy loop an eighth of a CPU (seen: a quarter).
  EXPECT_LT(*during, 0.1);
  EXPECT_LT(*during / *before, 0.5) << "before " << *before << " during " << *during;
  EXPECT_FALSE(runner_->Exists(cgroup));
  absl::StatusOr<std::string> back = cgroups.CgroupOf(pid);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *origin);
}

// busy_threads (busy_threads_main.cc) with a thread per name, each spinning.
absl::StatusOr<common::Subprocess> SpawnBusyThreads(const std::vector<std::string>& names) {
  common::SpawnOptions o;
  o.argv = {absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/chaos/busy_threads")};
  o.argv.insert(o.argv.end(), names.begin(), names.end());
  o.parent_death_signal = SIGKILL;
  return common::Subprocess::Spawn(o);
}

// The TID of `pid`'s thread named `name`, waiting (bounded) for it to appear.
absl::StatusOr<int> AwaitThread(Runner& runner, int pid, const std::string& name) {
  absl::StatusOr<std::vector<int>> tids;
  for (int i = 0; i < 250; ++i) {
    tids = ThreadsNamed(&runner, pid, name);
    if (tids.ok()) return tids->front();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return tids.status();
}

// CPU seconds per wall second of threads `tids` of `pid`, each over the same `window`.
absl::StatusOr<std::vector<double>> ThreadShares(Runner& runner, int pid,
                                                 const std::vector<int>& tids,
                                                 absl::Duration window) {
  auto sample = [&]() -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> ns;
    for (int tid : tids) {
      absl::StatusOr<int64_t> n = ThreadCpuNanos(&runner, pid, tid, sysconf(_SC_CLK_TCK));
      if (!n.ok()) return n.status();
      ns.push_back(*n);
    }
    return ns;
  };
  absl::StatusOr<std::vector<int64_t>> c0 = sample();
  if (!c0.ok()) return c0.status();
  const absl::Time t0 = absl::Now();
  absl::SleepFor(window);
  absl::StatusOr<std::vector<int64_t>> c1 = sample();
  if (!c1.ok()) return c1.status();
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  std::vector<double> shares;
  for (size_t i = 0; i < tids.size(); ++i) {
    shares.push_back(static_cast<double>((*c1)[i] - (*c0)[i]) * 1e-9 / wall);
  }
  return shares;
}

// A thread fault caps the named thread (the emulated device) and leaves the rank's other threads
// (its communication) alone.
TEST_F(CgroupRealTest, ThreadQuotaThrottlesOnlyTheNamedThread) {
  if (hierarchy_.version != CgroupVersion::kV1) {
    FALCON_SKIP_OR_FAIL("cgroup v2: thread faults need cgroup v1 (chaos/cgroup.h)");
  }
  absl::StatusOr<common::Subprocess> busy = SpawnBusyThreads({"falcon-device", "falcon-comm"});
  ASSERT_TRUE(busy.ok()) << busy.status();
  const int pid = busy->pid();
  absl::StatusOr<int> device = AwaitThread(*runner_, pid, "falcon-device");
  ASSERT_TRUE(device.ok()) << device.status();
  absl::StatusOr<int> comm = AwaitThread(*runner_, pid, "falcon-comm");
  ASSERT_TRUE(comm.ok()) << comm.status();
  Cgroups cgroups(runner_.get(), hierarchy_);
  absl::StatusOr<std::string> origin = cgroups.CgroupOfThread(pid, *device);
  ASSERT_TRUE(origin.ok()) << origin.status();

  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(Loopback(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok()) << driver.status();
  absl::StatusOr<std::vector<double>> before =
      ThreadShares(*runner_, pid, {*device, *comm}, absl::Seconds(2));
  ASSERT_TRUE(before.ok()) << before.status();

  absl::StatusOr<int> id = (*driver)->Apply(
      *ParseFaultSpec(absl::StrCat("compute:pid=", pid, ",thread=falcon-device,quota=0.05"), 2));
  ASSERT_TRUE(id.ok()) << id.status();
  const Target& t = (*driver)->record().faults[0].target;
  const std::string cgroup = t.cgroup;
  EXPECT_EQ(t.thread, "falcon-device");
  EXPECT_EQ(t.tids, std::vector<int>{*device});
  EXPECT_EQ(Read(*runner_, cgroup + "/tasks"), absl::StrCat(*device, "\n"));
  absl::StatusOr<std::string> comm_during = cgroups.CgroupOfThread(pid, *comm);
  absl::StatusOr<std::vector<double>> during =
      ThreadShares(*runner_, pid, {*device, *comm}, absl::Seconds(2));
  ASSERT_TRUE(during.ok()) << during.status();

  ASSERT_TRUE((*driver)->Remove(*id).ok());
  const double device_ratio = (*during)[0] / (*before)[0];
  const double comm_ratio = (*during)[1] / (*before)[1];
  std::printf(
      "thread CPU shares: falcon-device before %.3f during quota 0.05 %.3f (ratio %.3f); "
      "falcon-comm before %.3f during %.3f (ratio %.3f)\n",
      (*before)[0], (*during)[0], device_ratio, (*before)[1], (*during)[1], comm_ratio);
  ASSERT_TRUE(comm_during.ok());
  EXPECT_EQ(*comm_during, *origin);  // Only the named thread moved.
  // The quota is a ceiling whatever the load (0.05 CPU plus accounting granularity).
  EXPECT_LT((*during)[0], 0.1);
  EXPECT_LT(device_ratio, 0.5) << "before " << (*before)[0] << " during " << (*during)[0];
  // The other thread is not capped: with the device thread capped it gets at least as much CPU
  // on an idle machine; other load may take some, never a share comparable to the cap's.
  EXPECT_GT(comm_ratio, 0.5) << "before " << (*before)[1] << " during " << (*during)[1];
  EXPECT_GT(comm_ratio, 4 * device_ratio);
  EXPECT_FALSE(runner_->Exists(cgroup));
  absl::StatusOr<std::string> back = cgroups.CgroupOfThread(pid, *device);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *origin);
  EXPECT_EQ((*driver)->record().faults[0].note, "");
}

TEST_F(CgroupRealTest, SlowdownCapsAtAFractionOfTheMeasuredUse) {
  absl::StatusOr<common::Subprocess> busy = SpawnBusyLoop();
  ASSERT_TRUE(busy.ok());
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(Loopback(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok());
  absl::StatusOr<int> id = (*driver)->Apply(
      *ParseFaultSpec(absl::StrCat("compute:pid=", busy->pid(), ",slowdown=2"), 2));
  ASSERT_TRUE(id.ok()) << id.status();
  const Target& t = (*driver)->record().faults[0].target;
  ASSERT_TRUE(t.measured_cores.has_value());
  absl::StatusOr<double> during = CpuShare(busy->pid(), absl::Seconds(2));
  ASSERT_TRUE(during.ok());
  ASSERT_TRUE((*driver)->Remove(*id).ok());
  std::printf("slowdown x2: measured %.3f cores, quota %.3f, during %.3f (%.3f of the use)\n",
              *t.measured_cores, t.quota_cores, *during, *during / *t.measured_cores);
  EXPECT_NEAR(t.quota_cores, *t.measured_cores / 2, 1e-9);
  // A ceiling whatever the load: half the measured use plus accounting granularity.
  EXPECT_LT(*during, 0.6 * *t.measured_cores + 0.02);
}

TEST_F(CgroupRealTest, RemovalAfterTheProcessDiedIsRecorded) {
  absl::StatusOr<common::Subprocess> busy = SpawnBusyLoop();
  ASSERT_TRUE(busy.ok());
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(Loopback(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok());
  absl::StatusOr<int> id = (*driver)->Apply(
      *ParseFaultSpec(absl::StrCat("compute:pid=", busy->pid(), ",quota=0.5,period=10ms"), 2));
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string cgroup = (*driver)->record().faults[0].target.cgroup;
  ASSERT_TRUE(busy->Stop(SIGKILL, absl::Seconds(5)).ok());  // Killed and reaped.
  EXPECT_TRUE((*driver)->Remove(*id).ok());
  EXPECT_THAT((*driver)->record().faults[0].note, HasSubstr("had exited"));
  EXPECT_FALSE(runner_->Exists(cgroup));
}

TEST_F(CgroupRealTest, ContentionRunsPinnedStressNgAndStopsIt) {
  FALCON_REQUIRE_EXECUTABLE("/usr/bin/stress-ng", "Debian package stress-ng");
  absl::StatusOr<common::Subprocess> busy = SpawnBusyLoop({0});
  ASSERT_TRUE(busy.ok());
  absl::StatusOr<std::unique_ptr<Driver>> driver =
      Driver::Create(Loopback(), {}, runner_.get(), &clock_);
  ASSERT_TRUE(driver.ok());
  absl::StatusOr<double> before = CpuShare(busy->pid(), absl::Seconds(1));
  ASSERT_TRUE(before.ok());
  absl::StatusOr<int> id = (*driver)->Apply(
      *ParseFaultSpec(absl::StrCat("contention:pid=", busy->pid(), ",workers=4"), 2));
  ASSERT_TRUE(id.ok()) << id.status();
  const Target& t = (*driver)->record().faults[0].target;
  EXPECT_EQ(t.cpus, "0");
  const int stress = t.stress_pid;
  ASSERT_TRUE(Alive(stress));
  // stress-ng forks its workers: wait (bounded) for them, then check where they run.
  std::vector<int> workers;
  for (int i = 0; i < 250 && workers.size() < 4; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    workers = Children(*runner_, stress);
  }
  ASSERT_EQ(workers.size(), 4u);
  for (int w : workers) {
    EXPECT_THAT(Read(*runner_, absl::StrCat("/proc/", w, "/status")),
                HasSubstr("Cpus_allowed_list:\t0\n"));
  }
  // The workers run at the busy loop's niceness (the test may run niced) and take CPU 0 from it.
  EXPECT_EQ(t.nice, 0);
  absl::StatusOr<double> worker_share = CpuShare(workers[0], absl::Seconds(1));
  absl::StatusOr<double> during = CpuShare(busy->pid(), absl::Seconds(1));
  ASSERT_TRUE(worker_share.ok() && during.ok());
  ASSERT_TRUE((*driver)->Remove(*id).ok());
  std::printf(
      "CPU 0 share of the busy loop: before %.3f, with 4 workers %.3f (ratio %.3f); a "
      "worker %.3f\n",
      *before, *during, *during / *before, *worker_share);
  // At nice 19 against nice-0 tasks a worker would get under 0.01 of CPU 0.
  EXPECT_GT(*worker_share, 0.02);
  // Five equal tasks on CPU 0: a fifth each when nothing else runs there, (1 + L) / (5 + L) of the
  // share before with L other tasks there: below 0.8 up to L = 11.
  EXPECT_LT(*during / *before, 0.8);
  EXPECT_FALSE(Alive(stress));
  for (int w : workers) EXPECT_TRUE(AwaitGone(w)) << "worker " << w;
}

TEST_F(CgroupRealTest, StressNgDiesWithItsDriver) {
  FALCON_REQUIRE_EXECUTABLE("/usr/bin/stress-ng", "Debian package stress-ng");
  // A driver process that starts stress-ng and is then killed with SIGKILL (no clean-up).
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  common::SpawnOptions o;
  o.name = "doomed-driver";
  absl::StatusOr<common::Subprocess> doomed = common::Subprocess::SpawnFunction(o, [&] {
    std::unique_ptr<Runner> runner = NewRealRunner();
    absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
        runner->Spawn({"stress-ng", "--cpu", "1", "--taskset", "0", "--timeout", "0", "--quiet"});
    const int pid = p.ok() ? (*p)->pid() : -1;
    (void)!write(pipe_fds[1], &pid, sizeof(pid));
    for (;;) pause();
    return 0;
  });
  ASSERT_TRUE(doomed.ok());
  close(pipe_fds[1]);
  int stress = -1;
  ASSERT_EQ(read(pipe_fds[0], &stress, sizeof(stress)), static_cast<ssize_t>(sizeof(stress)));
  close(pipe_fds[0]);
  ASSERT_GT(stress, 0);
  ASSERT_TRUE(Alive(stress));
  ASSERT_TRUE(doomed->Stop(SIGKILL, absl::Seconds(5)).ok());
  EXPECT_TRUE(AwaitGone(stress)) << "stress-ng " << stress << " outlived its driver";
}

}  // namespace
}  // namespace falcon::chaos
