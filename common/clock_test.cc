#include "common/clock.h"

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.MonotonicNanos(), 0);
  clock.Advance(absl::Milliseconds(5));
  EXPECT_EQ(clock.Now() - t0, absl::Milliseconds(5));
  EXPECT_EQ(clock.MonotonicNanos(), 5'000'000);
  clock.Advance(-absl::Seconds(1));  // ignored: time never goes backwards
  EXPECT_EQ(clock.MonotonicNanos(), 5'000'000);
}

TEST(RealClockTest, MonotonicNeverDecreases) {
  RealClock clock;
  int64_t last = clock.MonotonicNanos();
  for (int i = 0; i < 1000; ++i) {
    const int64_t now = clock.MonotonicNanos();
    ASSERT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace falcon::common
