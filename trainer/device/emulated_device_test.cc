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
