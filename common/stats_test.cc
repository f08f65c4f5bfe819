#include "common/stats.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

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
