#include "trainer/device/emulated_device.h"

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::device {
namespace {

// A thread whose CPU runs at 1/speed of wall time while it works (speed 3: a third of a core).
class FakeHost : public Host {
 public:
  int64_t MonotonicNanos() override { return wall_ns; }
  int64_t ThreadCpuNanos() override { return cpu_ns; }
  void Work(int64_t ns) override {
    cpu_ns += ns;
    wall_ns += static_cast<int64_t>(static_cast<double>(ns) * speed);
    work_calls++;
  }
  void SleepFor(absl::Duration d) override { wall_ns += absl::ToInt64Nanoseconds(d); }

  int64_t wall_ns = 0;
  int64_t cpu_ns = 0;
  double speed = 1;
  int work_calls = 0;
};

TEST(EmulatedDeviceTest, HealthyOpTakesItsNominalTimeAndDutyOfItOnTheCpu) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 8, .own_thread = false}, &host);
  EXPECT_EQ(device.Run(absl::Milliseconds(10)), absl::Milliseconds(10));
  EXPECT_EQ(host.cpu_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(device.slowdown(), 1.0);
  EXPECT_EQ(device.Run(absl::ZeroDuration()), absl::ZeroDuration());
  EXPECT_EQ(device.Run(absl::Milliseconds(-1)), absl::ZeroDuration());
  EXPECT_EQ(host.work_calls, 1);
}

TEST(EmulatedDeviceTest, ZeroDutyIsAFixedSpeedDevice) {
  FakeHost host;
  EmulatedDevice device({.duty = 0, .window = 8, .own_thread = false}, &host);
  host.speed = 3;  // Whatever the OS gives the rank.
  EXPECT_EQ(device.Run(absl::Milliseconds(10)), absl::Milliseconds(10));
  EXPECT_EQ(host.work_calls, 0);
  EXPECT_EQ(host.cpu_ns, 0);
}

TEST(EmulatedDeviceTest, LessCpuSlowsEveryOpByTheSameFactor) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 8, .own_thread = false}, &host);
  host.speed = 3;  // The OS now gives the rank a third of what it asks for.
  for (int i = 0; i < 8; ++i) device.Run(absl::Milliseconds(10));
  EXPECT_DOUBLE_EQ(device.slowdown(), 3.0);
  EXPECT_EQ(device.Run(absl::Milliseconds(10)), absl::Milliseconds(30));
  EXPECT_EQ(device.Run(absl::Milliseconds(4)), absl::Milliseconds(12));
  host.speed = 1;  // Quota lifted: the window forgets the slow ops.
  for (int i = 0; i < 8; ++i) device.Run(absl::Milliseconds(10));
  EXPECT_EQ(device.Run(absl::Milliseconds(10)), absl::Milliseconds(10));
}

TEST(EmulatedDeviceTest, OnePreemptedOpMovesTheWindowLittle) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 64, .own_thread = false}, &host);
  for (int i = 0; i < 63; ++i) device.Run(absl::Milliseconds(4));
  host.speed = 11;  // One op's 0.4 ms of work waited 4 ms for its core.
  device.Run(absl::Milliseconds(4));
  EXPECT_NEAR(device.slowdown(), 1.0 + 10.0 / 64, 1e-9);
}

TEST(EmulatedDeviceTest, SlowdownIsCapped) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 4, .max_slowdown = 5, .own_thread = false}, &host);
  host.speed = 1000;  // Stopped for a long time.
  const absl::Duration took = device.Run(absl::Milliseconds(10));
  EXPECT_DOUBLE_EQ(device.slowdown(), 5.0);
  EXPECT_EQ(took, absl::Milliseconds(1000));  // The work itself took that long; no extra wait.
  host.speed = 1;
  EXPECT_EQ(device.Run(absl::Milliseconds(1)), absl::Milliseconds(5));
}

// A thread under a CPU quota of `quota` cores, as a fluid token bucket (the kernel's CFS quota
// smoothed over its period): the thread runs at full speed while it has CPU time banked (at most
// `burst_ns`, accrued at `quota` per wall nanosecond), and at `quota` once the bank is empty.
class QuotaHost : public Host {
 public:
  QuotaHost(double quota, int64_t burst_ns) : quota_(quota), burst_ns_(burst_ns) {}
  int64_t MonotonicNanos() override { return static_cast<int64_t>(wall_ns_); }
  int64_t ThreadCpuNanos() override { return static_cast<int64_t>(cpu_ns_); }
  void Work(int64_t ns) override {
    double need = static_cast<double>(ns);
    cpu_ns_ += need;
    // Full speed while the bank lasts (it drains at 1 - quota per nanosecond).
    const double full = std::min(need, bank_ns_ / (1.0 - quota_));
    wall_ns_ += full;
    bank_ns_ -= full * (1.0 - quota_);
    need -= full;
    wall_ns_ += need / quota_;
  }
  void SleepFor(absl::Duration d) override {
    const double ns = absl::ToDoubleNanoseconds(d);
    wall_ns_ += ns;
    bank_ns_ = std::min(static_cast<double>(burst_ns_), bank_ns_ + quota_ * ns);
  }
  double cpu_ns() const { return cpu_ns_; }
  double wall_ns() const { return wall_ns_; }

 private:
  const double quota_;
  const int64_t burst_ns_;
  double wall_ns_ = 0;
  double cpu_ns_ = 0;
  double bank_ns_ = 0;
};

// The mean time of a 3 ms op in iterations of `ops` ops, each iteration ending with 10 ms in which
// the rank waits for its peers (the device idle), after a warm-up of 50 iterations.
double MeanOpMillis(EmulatedDevice& device, int ops) {
  absl::Duration total;
  int counted = 0;
  for (int it = 0; it < 100; ++it) {
    for (int i = 0; i < ops; ++i) {
      const absl::Duration took = device.Run(absl::Milliseconds(3));
      if (it >= 50) {
        total += took;
        ++counted;
      }
    }
    device.Idle(absl::Milliseconds(10));
  }
  return absl::ToDoubleMilliseconds(total) / counted;
}

// The quota the fault driver sets for slowdown=1.5: the device's CPU use (duty of a core, busy or
// idle) divided by 1.5. The burst is the kernel's: quota x its 100 ms period.
constexpr double kQuota = 0.1 / 1.5;
constexpr int64_t kBurstNs = static_cast<int64_t>(kQuota * 100'000'000);

TEST(EmulatedDeviceTest, UnderAQuotaEveryOpSlowsByTheSameFactorWhateverTheLoad) {
  // 16 ops per iteration (healthy share), then 6 (S2 gave the slow rank fewer micro-batches).
  for (const int ops : {16, 6}) {
    QuotaHost host(kQuota, kBurstNs);
    EmulatedDevice device({.duty = 0.1, .window = 64, .own_thread = false}, &host);
    EXPECT_NEAR(MeanOpMillis(device, ops), 3 * 1.5, 3 * 0.1) << ops << " ops per iteration";
    // The device asked for duty of a core all along, busy or idle; it got the quota.
    EXPECT_NEAR(host.cpu_ns() / host.wall_ns(), kQuota, kQuota * 0.05) << ops;
  }
}

TEST(EmulatedDeviceTest, WithoutIdleCyclesAQuotaIsACapacityLimitThatLessWorkEscapes) {
  // What the idle cycles are for: a device that asks for CPU only while it runs ops is slowed
  // while it is given its full share and runs at full speed once given less, so mitigation would
  // see the fault clear whenever it helped.
  std::vector<double> op_ms;
  for (const int ops : {16, 6}) {
    QuotaHost host(kQuota, kBurstNs);
    EmulatedDevice device(
        {.duty = 0.1, .window = 64, .own_thread = false, .idle_cycle = absl::ZeroDuration()},
        &host);
    op_ms.push_back(MeanOpMillis(device, ops));
  }
  EXPECT_GT(op_ms[0], 3 * 1.15);
  EXPECT_LT(op_ms[1], 3 * 1.02);
}

TEST(EmulatedDeviceTest, IdleCyclesRunAtDutyAndStopWhenTheyAreOff) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 8, .own_thread = false}, &host);
  device.Idle(absl::Milliseconds(100));
  // Healthy: 2 ms cycles, 0.2 ms of work each: 10% of the idle time on the CPU.
  EXPECT_NEAR(static_cast<double>(host.cpu_ns), 10'000'000, 200'000);
  EXPECT_EQ(host.wall_ns, 100'000'000);
  device.Idle(absl::ZeroDuration());
  EXPECT_EQ(host.wall_ns, 100'000'000);

  FakeHost idle_host;
  EmulatedDevice unclocked(
      {.duty = 0.1, .window = 8, .own_thread = false, .idle_cycle = absl::ZeroDuration()},
      &idle_host);
  unclocked.Idle(absl::Milliseconds(100));
  EXPECT_EQ(idle_host.cpu_ns, 0);
  EXPECT_EQ(idle_host.wall_ns, 100'000'000);
}

int64_t CpuNanos(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// The names of this process's threads (/proc/self/task/TID/comm).
std::vector<std::string> ThreadNames() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(entry.path() / "comm");
    std::string name;
    std::getline(in, name);
    names.push_back(name);
  }
  return names;
}

TEST(EmulatedDeviceTest, WithoutItsThreadWorksOnTheCallersCpu) {
  EmulatedDevice device({.duty = 0.25, .window = 4, .own_thread = false});
  const int64_t before = CpuNanos(CLOCK_THREAD_CPUTIME_ID);
  const absl::Duration took = device.Run(absl::Milliseconds(8));
  EXPECT_GE(CpuNanos(CLOCK_THREAD_CPUTIME_ID) - before, 2'000'000);  // duty x nominal, here.
  EXPECT_GE(took, absl::Milliseconds(8));  // Never faster than nominal (slowdown >= 1).
}

TEST(EmulatedDeviceTest, RunsOnItsOwnNamedThread) {
  const auto count = [] {
    const std::vector<std::string> names = ThreadNames();
    return std::count(names.begin(), names.end(), std::string(kDeviceThreadName));
  };
  const int64_t threads_before = count();
  {
    EmulatedDevice device({.duty = 0.5, .window = 4});
    const int64_t mine = CpuNanos(CLOCK_THREAD_CPUTIME_ID);
    const int64_t process = CpuNanos(CLOCK_PROCESS_CPUTIME_ID);
    const absl::Duration took = device.Run(absl::Milliseconds(20));
    EXPECT_GE(took, absl::Milliseconds(20));
    // The 10 ms of work ran on the device's thread, not on this one.
    EXPECT_GE(CpuNanos(CLOCK_PROCESS_CPUTIME_ID) - process, 10'000'000);
    EXPECT_LT(CpuNanos(CLOCK_THREAD_CPUTIME_ID) - mine, 5'000'000);
    EXPECT_EQ(count(), threads_before + 1);
    // Idle, the device's clock runs: it keeps using CPU with no op queued.
    const int64_t idle_from = CpuNanos(CLOCK_PROCESS_CPUTIME_ID);
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_GT(CpuNanos(CLOCK_PROCESS_CPUTIME_ID) - idle_from, 20'000'000);
    // Callers on several threads take turns.
    std::vector<std::thread> callers;
    for (int i = 0; i < 3; ++i) {
      callers.emplace_back(
          [&device] { EXPECT_GE(device.Run(absl::Milliseconds(2)), absl::Milliseconds(2)); });
    }
    for (std::thread& t : callers) t.join();
  }
  EXPECT_EQ(count(), threads_before) << "the device's thread ends with it";
}

}  // namespace
}  // namespace falcon::trainer::device
