#include "common/stats.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::ElementsAre;

TEST(MedianTest, OddAndEvenSizes) {
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{}), 0);
}

TEST(MedianTest, LeavesInputUntouched) {
  const std::vector<double> v = {5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(Median(v), 3);
  EXPECT_EQ(v, (std::vector<double>{5, 4, 3, 2, 1}));
}

TEST(MedianTest, NoOverflowNearLargestDouble) {
  const double big = std::numeric_limits<double>::max();
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{big, big}), big);
}

TEST(MedianTest, Integers) {
  EXPECT_EQ(Median(std::vector<int64_t>{7, 1, 4}), 4);
  EXPECT_EQ(Median(std::vector<int64_t>{1, 2, 3, 4}), 2);
  EXPECT_EQ(Median(std::vector<int64_t>{-3, -2}), -3);
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Median(std::vector<int64_t>{max, max - 2}), max - 1);
  EXPECT_EQ(Median(std::vector<int64_t>{min, max}), -1);
}

TEST(MedianTest, Durations) {
  EXPECT_EQ(Median(std::vector<absl::Duration>{absl::Seconds(3), absl::Seconds(1)}),
            absl::Seconds(2));
}

// Against m separate Median calls, on samples with ties and of odd and even sizes.
TEST(MediansExcludingEachTest, EqualsMedianOfTheOthers) {
  EXPECT_TRUE(MediansExcludingEach({}).empty());
  EXPECT_THAT(MediansExcludingEach({5.0}), ElementsAre(0.0));
  EXPECT_THAT(MediansExcludingEach({1.0, 3.0}), ElementsAre(3.0, 1.0));
  EXPECT_THAT(MediansExcludingEach({3.0, 1.0, 2.0}), ElementsAre(1.5, 2.5, 2.0));
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> v(1 + rng() % 12);
    for (double& x : v) x = static_cast<double>(rng() % 5);  // Ties on purpose.
    const std::vector<double> got = MediansExcludingEach(v);
    ASSERT_EQ(got.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      std::vector<double> others = v;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_EQ(got[i], Median(others)) << "trial " << trial << " index " << i;
    }
  }
}

TEST(MadTest, RobustToOneOutlier) {
  EXPECT_DOUBLE_EQ(Mad(std::vector<double>{1, 2, 3, 4, 1000}), 1);
  EXPECT_DOUBLE_EQ(Mad(std::vector<double>{5}), 0);
}

TEST(QuantileTest, LinearInterpolation) {
  const std::vector<double> v = {10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(Quantile(v, 0), 10);
  EXPECT_DOUBLE_EQ(Quantile(v, 1), 50);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.5), 30);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.9), 46);
  EXPECT_DOUBLE_EQ(Quantile(v, 7), 50);  // clamped
  EXPECT_DOUBLE_EQ(Quantile(std::vector<double>{}, 0.5), 0);
}

TEST(MeanTest, NoOverflow) {
  const double big = std::numeric_limits<double>::max();
  EXPECT_DOUBLE_EQ(Mean(std::vector<double>{big, big}), big);
  EXPECT_DOUBLE_EQ(Mean(std::vector<double>{1, 2, 3}), 2);
}

}  // namespace
}  // namespace falcon::common
