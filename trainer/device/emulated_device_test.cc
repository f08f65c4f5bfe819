#include "trainer/device/emulated_device.h"

#include <time.h>

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
  EmulatedDevice device({.duty = 0.1, .window = 8}, &host);
  EXPECT_EQ(device.Run(absl::Milliseconds(10)), absl::Milliseconds(10));
  EXPECT_EQ(host.cpu_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(device.slowdown(), 1.0);
  EXPECT_EQ(device.Run(absl::ZeroDuration()), absl::ZeroDuration());
  EXPECT_EQ(device.Run(absl::Milliseconds(-1)), absl::ZeroDuration());
  EXPECT_EQ(host.work_calls, 1);
}

TEST(EmulatedDeviceTest, LessCpuSlowsEveryOpByTheSameFactor) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 8}, &host);
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
  EmulatedDevice device({.duty = 0.1, .window = 64}, &host);
  for (int i = 0; i < 63; ++i) device.Run(absl::Milliseconds(4));
  host.speed = 11;  // One op's 0.4 ms of work waited 4 ms for its core.
  device.Run(absl::Milliseconds(4));
  EXPECT_NEAR(device.slowdown(), 1.0 + 10.0 / 64, 1e-9);
}

TEST(EmulatedDeviceTest, SlowdownIsCapped) {
  FakeHost host;
  EmulatedDevice device({.duty = 0.1, .window = 4, .max_slowdown = 5}, &host);
  host.speed = 1000;  // Stopped for a long time.
  const absl::Duration took = device.Run(absl::Milliseconds(10));
  EXPECT_DOUBLE_EQ(device.slowdown(), 5.0);
  EXPECT_EQ(took, absl::Milliseconds(1000));  // The work itself took that long; no extra wait.
  host.speed = 1;
  EXPECT_EQ(device.Run(absl::Milliseconds(1)), absl::Milliseconds(5));
}

TEST(EmulatedDeviceTest, RealHostWorksOnTheCallingThreadsCpu) {
  EmulatedDevice device({.duty = 0.25, .window = 4});
  timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  const absl::Duration took = device.Run(absl::Milliseconds(8));
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  const int64_t cpu_ns = (b.tv_sec - a.tv_sec) * 1'000'000'000LL + (b.tv_nsec - a.tv_nsec);
  EXPECT_GE(cpu_ns, 2'000'000);            // duty x nominal of real work on this thread.
  EXPECT_GE(took, absl::Milliseconds(8));  // Never faster than nominal (slowdown >= 1).
  EXPECT_GE(device.slowdown(), 1.0);
}

}  // namespace
}  // namespace falcon::trainer::device
