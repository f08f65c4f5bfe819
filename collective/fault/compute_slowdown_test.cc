#include "collective/fault/compute_slowdown.h"

#include "collective/fault/recording_sleeper.h"
#include "gtest/gtest.h"

namespace falcon::collective::fault {
namespace {

TEST(ComputeSlowdownTest, FactorOnlyForItsRankAndWindow) {
  ComputeFault f;
  f.rank = 3;
  f.factor = 1.5;
  f.window = {100, 300};
  RecordingSleeper sleeper;
  ComputeSlowdown mine({f}, 3, &sleeper);
  ComputeSlowdown other({f}, 2, &sleeper);
  EXPECT_DOUBLE_EQ(mine.FactorAt(99), 1.0);
  EXPECT_DOUBLE_EQ(mine.FactorAt(100), 1.5);
  EXPECT_DOUBLE_EQ(mine.FactorAt(299), 1.5);
  EXPECT_DOUBLE_EQ(mine.FactorAt(300), 1.0);
  EXPECT_DOUBLE_EQ(other.FactorAt(150), 1.0);
  EXPECT_EQ(mine.ExtraFor(150, absl::Milliseconds(10)), absl::Milliseconds(5));
  EXPECT_EQ(mine.ExtraFor(150, absl::ZeroDuration()), absl::ZeroDuration());
  EXPECT_EQ(other.Apply(150, absl::Milliseconds(10)), absl::ZeroDuration());
  EXPECT_EQ(mine.Apply(150, absl::Milliseconds(10)), absl::Milliseconds(5));
  EXPECT_EQ(sleeper.spent(), (std::vector<absl::Duration>{absl::Milliseconds(5)}));
}

TEST(ComputeSlowdownTest, OverlappingFactorsMultiply) {
  ComputeFault a, b;
  a.rank = b.rank = 0;
  a.factor = 2.0;
  b.factor = 1.5;
  b.window = {10, 20};
  RecordingSleeper sleeper;
  ComputeSlowdown s({a, b}, 0, &sleeper);
  EXPECT_DOUBLE_EQ(s.FactorAt(5), 2.0);
  EXPECT_DOUBLE_EQ(s.FactorAt(15), 3.0);
  EXPECT_EQ(s.ExtraFor(15, absl::Milliseconds(4)), absl::Milliseconds(8));
}

TEST(SleeperTest, RealSleepersSpendAtLeastTheTime) {
  for (Sleeper* s : std::initializer_list<Sleeper*>{new SleepingSleeper, new BurningSleeper}) {
    const absl::Time start = absl::Now();
    s->Spend(absl::Milliseconds(5));
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(5));
    s->Spend(absl::Milliseconds(-1));  // Returns at once.
    delete s;
  }
}

}  // namespace
}  // namespace falcon::collective::fault
