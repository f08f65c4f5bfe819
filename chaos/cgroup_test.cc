#include "chaos/cgroup.h"

#include <errno.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "chaos/fake_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kV1[] = "/sys/fs/cgroup/cpu";

// A v1 machine (cpu controller at /sys/fs/cgroup/cpu) with process 42 in /jobs.
void SetUpV1(FakeRunner& fake) {
  fake.SetFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  fake.SetFile("/sys/fs/cgroup/cpu/cgroup.procs", "1\n");
  fake.SetFile("/sys/fs/cgroup/cpu/jobs/cgroup.procs", "42\n");
  fake.SetFile("/proc/42/status", "Name:\trank\n");
  fake.SetFile("/proc/42/cgroup",
               "12:cpuset:/\n4:cpu,cpuacct:/jobs\n2:cpuacct:/x\n0::/user.slice\n");
}

void SetUpV2(FakeRunner& fake) {
  fake.SetFile("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
  fake.SetFile("/sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n");
  fake.SetFile("/sys/fs/cgroup/cgroup.procs", "");
  fake.SetFile("/sys/fs/cgroup/user.slice/cgroup.procs", "42\n");
  fake.SetFile("/proc/42/status", "Name:\trank\n");
  fake.SetFile("/proc/42/cgroup", "0::/user.slice\n");
}

TEST(CgroupTest, DetectsV1AndV2) {
  FakeRunner v1;
  SetUpV1(v1);
  absl::StatusOr<CgroupHierarchy> h = DetectCgroupHierarchy(&v1, "/sys/fs/cgroup");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->version, CgroupVersion::kV1);
  EXPECT_EQ(h->root, kV1);

  FakeRunner v2;
  SetUpV2(v2);
  h = DetectCgroupHierarchy(&v2, "/sys/fs/cgroup");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->version, CgroupVersion::kV2);
  EXPECT_EQ(h->root, "/sys/fs/cgroup");

  FakeRunner none;
  h = DetectCgroupHierarchy(&none, "/sys/fs/cgroup");
  EXPECT_EQ(h.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(h.status().message(), HasSubstr("no cgroup cpu controller"));

  FakeRunner no_cpu;
  no_cpu.SetFile("/sys/fs/cgroup/cgroup.controllers", "memory pids\n");
  h = DetectCgroupHierarchy(&no_cpu, "/sys/fs/cgroup");
  EXPECT_THAT(h.status().message(), HasSubstr("has no cpu controller"));
}

TEST(CgroupTest, Names) {
  EXPECT_EQ(ChaosCgroupTag("fn3a7f"), "fn3a7f");
  EXPECT_EQ(ChaosCgroupTag(""), "loopback");
  EXPECT_EQ(ChaosCgroupTag("a.b/c"), "a_b_c");
  const std::string name = FormatChaosCgroupName({"fn3a7f", 4242, 7});
  EXPECT_EQ(name, "falcon-chaos.fn3a7f.4242.7");
  std::optional<ChaosCgroupName> parsed = ParseChaosCgroupName(name);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->tag, "fn3a7f");
  EXPECT_EQ(parsed->driver_pid, 4242);
  EXPECT_EQ(parsed->fault_id, 7);
  EXPECT_FALSE(ParseChaosCgroupName("falcon-chaos.x.1").has_value());
  EXPECT_FALSE(ParseChaosCgroupName("falcon-chaos.x.y.1").has_value());
  EXPECT_FALSE(ParseChaosCgroupName("user.slice").has_value());
  EXPECT_FALSE(ParseChaosCgroupName("falcon-chaos..1.2").has_value());
}

TEST(CgroupTest, V1ApplyAndRelease) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.1", 0.3, absl::Milliseconds(10));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cgroup, "/sys/fs/cgroup/cpu/falcon-chaos.fn.9.1");
  EXPECT_EQ(t->origin, "/jobs");
  EXPECT_EQ(t->period_us, 10000);
  EXPECT_EQ(t->quota_us, 3000);
  EXPECT_THAT(fake.lines(),
              ElementsAre("mkdir /sys/fs/cgroup/cpu/falcon-chaos.fn.9.1",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.1/cpu.cfs_period_us 10000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.1/cpu.cfs_quota_us 3000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.1/cgroup.procs 42"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/cgroup.procs"), "");
  // The rank started a child meanwhile: it comes back too.
  fake.SetFile("/proc/43/status", "");
  ASSERT_TRUE(fake.WriteFile("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.1/cgroup.procs", "43").ok());
  fake.ClearLines();
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "");
  EXPECT_THAT(fake.lines(), ElementsAre("write /sys/fs/cgroup/cpu/jobs/cgroup.procs 42",
                                        "write /sys/fs/cgroup/cpu/jobs/cgroup.procs 43",
                                        "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fn.9.1"));
  EXPECT_FALSE(fake.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.1"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/cgroup.procs"), "42\n43\n");
}

TEST(CgroupTest, V2ApplyAndRelease) {
  FakeRunner fake;
  SetUpV2(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV2, "/sys/fs/cgroup"});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.2", 1.5, absl::Milliseconds(100));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->origin, "/user.slice");
  EXPECT_THAT(fake.lines(),
              ElementsAre("mkdir /sys/fs/cgroup/falcon-chaos.fn.9.2",
                          "write /sys/fs/cgroup/falcon-chaos.fn.9.2/cpu.max 150000 100000",
                          "write /sys/fs/cgroup/falcon-chaos.fn.9.2/cgroup.procs 42"));
  fake.ClearLines();
  ASSERT_TRUE(cgroups.Release(42, *t).ok());
  EXPECT_THAT(fake.lines(), ElementsAre("write /sys/fs/cgroup/user.slice/cgroup.procs 42",
                                        "rmdir /sys/fs/cgroup/falcon-chaos.fn.9.2"));
}

TEST(CgroupTest, V2NeedsTheCpuControllerEnabled) {
  FakeRunner fake;
  SetUpV2(fake);
  fake.SetFile("/sys/fs/cgroup/cgroup.subtree_control", "memory\n");
  Cgroups cgroups(&fake, {CgroupVersion::kV2, "/sys/fs/cgroup"});
  absl::StatusOr<Throttle> t = cgroups.Apply(42, "falcon-chaos.fn.9.2", 1, absl::Milliseconds(100));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("the cpu controller is not enabled in "
                                              "/sys/fs/cgroup/cgroup.subtree_control"));
  EXPECT_THAT(fake.Lines("mkdir"), IsEmpty());
}

TEST(CgroupTest, QuotaHasTheKernelsMinimum) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t = cgroups.Apply(42, "falcon-chaos.fn.9.3", 0.0001, absl::Seconds(1));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->quota_us, 1000);
}

TEST(CgroupTest, FailedWriteLeavesNothingBehind) {
  FakeRunner fake;
  SetUpV1(fake);
  fake.cgroup_files = {"cgroup.procs", "cpu.cfs_period_us"};  // No cpu.cfs_quota_us.
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.4", 0.5, absl::Milliseconds(100));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("cgroup for pid 42: write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.4/"
                        "cpu.cfs_quota_us"));
  EXPECT_FALSE(fake.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.4"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/cgroup.procs"), "42\n");
}

TEST(CgroupTest, ProcessThatDoesNotExist) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(77, "falcon-chaos.fn.9.5", 0.5, absl::Milliseconds(100));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("cgroup of pid 77: read /proc/77/cgroup"));
}

TEST(CgroupTest, OriginOutsideTheMount) {
  FakeRunner fake;
  SetUpV1(fake);
  fake.SetFile("/proc/42/cgroup", "4:cpu,cpuacct:/elsewhere\n");
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.6", 0.5, absl::Milliseconds(100));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("/elsewhere is not under /sys/fs/cgroup/cpu"));
}

TEST(CgroupTest, ReleaseOfAProcessThatExited) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.7", 0.5, absl::Milliseconds(100));
  ASSERT_TRUE(t.ok());
  // The process exits: the kernel takes it out of the cgroup.
  fake.RemoveFile("/proc/42/status");
  fake.SetFile(t->cgroup + "/cgroup.procs", "");
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "process 42 had exited");
  EXPECT_FALSE(fake.Exists(t->cgroup));
}

TEST(CgroupTest, ReleaseAfterTheOriginWentAway) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.8", 0.5, absl::Milliseconds(100));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(fake.RemoveDir("/sys/fs/cgroup/cpu/jobs").ok());
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "its cgroup /jobs is gone: moved to the root");
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/cgroup.procs"), "1\n42\n");
}

TEST(CgroupTest, ReleaseOfACgroupAlreadyCleared) {
  FakeRunner fake;
  SetUpV1(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.9", 0.5, absl::Milliseconds(100));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(fake.WriteFile("/sys/fs/cgroup/cpu/cgroup.procs", "42").ok());
  ASSERT_TRUE(fake.RemoveDir(t->cgroup).ok());
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok());
  EXPECT_EQ(*note, "the cgroup was already removed");
}

// SetUpV1 with threads 42 (main), 44 and 46 of process 42 in /jobs (v1 `tasks` files).
void SetUpV1Threads(FakeRunner& fake) {
  SetUpV1(fake);
  fake.SetFile("/sys/fs/cgroup/cpu/tasks", "1\n");
  fake.SetFile("/sys/fs/cgroup/cpu/jobs/tasks", "42\n44\n46\n");
  for (int tid : {42, 44, 46}) {
    fake.SetFile(absl::StrCat("/proc/42/task/", tid, "/comm"), tid == 42 ? "rank\n" : "dev\n");
    fake.SetFile(absl::StrCat("/proc/42/task/", tid, "/cgroup"), "4:cpu,cpuacct:/jobs\n");
  }
}

TEST(CgroupTest, V1ThreadsJoinThroughTasksAndGoBack) {
  FakeRunner fake;
  SetUpV1Threads(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.10", 0.05, absl::Milliseconds(100), {44, 46});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->origin, "/jobs");
  ASSERT_EQ(t->threads.size(), 2u);
  EXPECT_EQ(t->threads[1].tid, 46);
  EXPECT_EQ(t->threads[1].origin, "/jobs");
  EXPECT_THAT(fake.lines(),
              ElementsAre("mkdir /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10/cpu.cfs_period_us 100000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10/cpu.cfs_quota_us 5000",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10/tasks 44",
                          "write /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10/tasks 46"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/tasks"), "42\n");
  // The process itself stays where it was.
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/cgroup.procs"), "42\n");
  fake.ClearLines();
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "");
  EXPECT_THAT(fake.lines(), ElementsAre("write /sys/fs/cgroup/cpu/jobs/tasks 44",
                                        "write /sys/fs/cgroup/cpu/jobs/tasks 46",
                                        "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fn.9.10"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/jobs/tasks"), "42\n44\n46\n");
  EXPECT_FALSE(fake.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.10"));
}

TEST(CgroupTest, V1ThreadsThatEndedAreANote) {
  FakeRunner fake;
  SetUpV1Threads(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.11", 0.05, absl::Milliseconds(100), {44, 46});
  ASSERT_TRUE(t.ok()) << t.status();
  // Thread 46 ends (the kernel takes it out of `tasks`); 44 started thread 47 meanwhile.
  fake.RemoveTree("/proc/42/task/46");
  fake.SetFile("/proc/42/task/47/comm", "dev\n");
  fake.SetFile(t->cgroup + "/tasks", "44\n47\n");
  fake.ClearLines();
  absl::StatusOr<std::string> note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "thread 46 of process 42 had ended");
  EXPECT_THAT(fake.lines(), ElementsAre("write /sys/fs/cgroup/cpu/jobs/tasks 44",
                                        "write /sys/fs/cgroup/cpu/jobs/tasks 47",
                                        "rmdir /sys/fs/cgroup/cpu/falcon-chaos.fn.9.11"));
  // The whole process ended: one note for it.
  t = cgroups.Apply(42, "falcon-chaos.fn.9.12", 0.05, absl::Milliseconds(100), {44});
  ASSERT_TRUE(t.ok()) << t.status();
  fake.RemoveTree("/proc/42");
  fake.SetFile(t->cgroup + "/tasks", "");
  note = cgroups.Release(42, *t);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "process 42 had exited");
  EXPECT_FALSE(fake.Exists(t->cgroup));
}

TEST(CgroupTest, V1ThreadsApplyErrors) {
  FakeRunner fake;
  SetUpV1Threads(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  // A thread that ended before the fault: its cgroup cannot be read.
  fake.RemoveTree("/proc/42/task/44");
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.13", 0.05, absl::Milliseconds(100), {44});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("cgroup of thread 44 of pid 42: read "
                                              "/proc/42/task/44/cgroup"));
  EXPECT_THAT(fake.Lines("mkdir"), IsEmpty());
  // The second thread's write fails: the first goes back, the cgroup goes.
  FakeRunner fail;
  SetUpV1Threads(fail);
  fail.FailWrite("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.14/tasks", "46", EINVAL);
  Cgroups c2(&fail, {CgroupVersion::kV1, kV1});
  t = c2.Apply(42, "falcon-chaos.fn.9.14", 0.05, absl::Milliseconds(100), {44, 46});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("cgroup for pid 42: thread 46: write "
                                              "/sys/fs/cgroup/cpu/falcon-chaos.fn.9.14/tasks"));
  EXPECT_THAT(fail.Lines("write /sys/fs/cgroup/cpu/jobs/"),
              ElementsAre("write /sys/fs/cgroup/cpu/jobs/tasks 44"));
  EXPECT_FALSE(fail.Exists("/sys/fs/cgroup/cpu/falcon-chaos.fn.9.14"));
  EXPECT_EQ(fail.File("/sys/fs/cgroup/cpu/jobs/tasks"), "42\n46\n44\n");
}

TEST(CgroupTest, V2RefusesThreads) {
  FakeRunner fake;
  SetUpV2(fake);
  Cgroups cgroups(&fake, {CgroupVersion::kV2, "/sys/fs/cgroup"});
  absl::StatusOr<Throttle> t =
      cgroups.Apply(42, "falcon-chaos.fn.9.15", 0.5, absl::Milliseconds(100), {44});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(),
              HasSubstr("throttling single threads (thread=) needs cgroup v1; on cgroup v2"));
  EXPECT_THAT(fake.Lines("mkdir"), IsEmpty());
}

TEST(CgroupTest, RemoveChaosCgroupsSelectsByName) {
  FakeRunner fake;
  SetUpV1(fake);
  fake.AddDir("/sys/fs/cgroup/cpu/falcon-chaos.fn.100.1");
  fake.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.fn.100.1/cgroup.procs", "42\n");
  fake.AddDir("/sys/fs/cgroup/cpu/falcon-chaos.other.200.1");
  fake.SetFile("/sys/fs/cgroup/cpu/falcon-chaos.other.200.1/cgroup.procs", "");
  fake.AddDir("/sys/fs/cgroup/cpu/user.slice");
  Cgroups cgroups(&fake, {CgroupVersion::kV1, kV1});
  absl::StatusOr<std::vector<std::string>> removed =
      cgroups.RemoveChaosCgroups([](const ChaosCgroupName& n) { return n.tag == "fn"; });
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ElementsAre("/sys/fs/cgroup/cpu/falcon-chaos.fn.100.1"));
  EXPECT_EQ(fake.File("/sys/fs/cgroup/cpu/cgroup.procs"), "1\n42\n");
  EXPECT_TRUE(fake.Exists("/sys/fs/cgroup/cpu/falcon-chaos.other.200.1"));
  EXPECT_TRUE(fake.Exists("/sys/fs/cgroup/cpu/user.slice"));
}

}  // namespace
}  // namespace falcon::chaos
