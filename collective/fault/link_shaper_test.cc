#include "collective/fault/link_shaper.h"

#include "collective/fault/recording_sleeper.h"
#include "gtest/gtest.h"

namespace falcon::collective::fault {
namespace {

LinkFault Fault(int src, int dst, absl::Duration delay, double mbps, int64_t from, int64_t to) {
  LinkFault f;
  f.src = src;
  f.dst = dst;
  f.delay = delay;
  f.bandwidth_mbps = mbps;
  f.window = {from, to};
  return f;
}

TEST(LinkShaperTest, DelaysOnlyTheDirectedLinkInsideItsWindow) {
  RecordingSleeper sleeper;
  LinkShaper shaper({Fault(2, 3, absl::Milliseconds(20), 0, 50, 200)}, &sleeper);
  EXPECT_EQ(shaper.DelayFor(2, 3, 1000, 50), absl::Milliseconds(20));
  EXPECT_EQ(shaper.DelayFor(2, 3, 1000, 199), absl::Milliseconds(20));
  EXPECT_EQ(shaper.DelayFor(2, 3, 1000, 49), absl::ZeroDuration());
  EXPECT_EQ(shaper.DelayFor(2, 3, 1000, 200), absl::ZeroDuration());
  EXPECT_EQ(shaper.DelayFor(3, 2, 1000, 100), absl::ZeroDuration());
  EXPECT_EQ(shaper.DelayFor(2, 1, 1000, 100), absl::ZeroDuration());
  EXPECT_TRUE(shaper.HasLinksFrom(2));
  EXPECT_FALSE(shaper.HasLinksFrom(3));
  EXPECT_EQ(shaper.Apply(2, 3, 10, 60), absl::Milliseconds(20));
  EXPECT_EQ(shaper.Apply(3, 2, 10, 60), absl::ZeroDuration());
  EXPECT_EQ(sleeper.spent(), (std::vector<absl::Duration>{absl::Milliseconds(20)}));
}

TEST(LinkShaperTest, BandwidthCapAddsSerializationTime) {
  RecordingSleeper sleeper;
  // 500 Mbit/s: 1 MB (8e6 bits) takes 16 ms; plus 1 ms latency.
  LinkShaper shaper({Fault(0, 1, absl::Milliseconds(1), 500, 0, IterationWindow::kForever)},
                    &sleeper);
  EXPECT_EQ(shaper.DelayFor(0, 1, 1'000'000, 0), absl::Milliseconds(17));
  EXPECT_EQ(shaper.DelayFor(0, 1, 0, 0), absl::Milliseconds(1));
  // Unknown iteration (-1) counts as iteration 0.
  EXPECT_EQ(shaper.DelayFor(0, 1, 0, -1), absl::Milliseconds(1));
  // Six ring steps of 125 kB: 6 x (1 ms + 2 ms), spent at once.
  EXPECT_EQ(shaper.ApplySteps(0, 1, 125'000, 6, 0), absl::Milliseconds(18));
  EXPECT_EQ(shaper.ApplySteps(1, 0, 125'000, 6, 0), absl::ZeroDuration());
  EXPECT_EQ(sleeper.spent(), (std::vector<absl::Duration>{absl::Milliseconds(18)}));
}

TEST(LinkShaperTest, OverlappingFaultsAddDelaysAndTakeTheTighterCap) {
  RecordingSleeper sleeper;
  LinkShaper shaper({Fault(0, 1, absl::Milliseconds(2), 1000, 0, 10),
                     Fault(0, 1, absl::Milliseconds(3), 100, 5, 10)},
                    &sleeper);
  EXPECT_EQ(shaper.DelayFor(0, 1, 125'000, 1), absl::Milliseconds(2 + 1));   // 1 Mbit at 1 Gbit/s.
  EXPECT_EQ(shaper.DelayFor(0, 1, 125'000, 7), absl::Milliseconds(5 + 10));  // at 100 Mbit/s.
}

}  // namespace
}  // namespace falcon::collective::fault
