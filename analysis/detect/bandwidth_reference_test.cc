#include "analysis/detect/bandwidth_reference.h"

#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

TEST(BandwidthReferenceTest, UpperQuartileIsAMeasuredValue) {
  // Two of six slow (a NIC): the upper quartile is still a healthy value, the median would not be.
  BandwidthReference r = JudgeBandwidths({10, 10, 10, 10, 3, 3}, 0.1, 4);
  EXPECT_EQ(r.reference, 10);
  EXPECT_DOUBLE_EQ(r.Ratio(3), 10.0 / 3);
  EXPECT_TRUE(r.Slow(3));
  EXPECT_FALSE(r.Slow(9.5));
  EXPECT_FALSE(r.noise_known);  // Four healthy values say nothing about the noise.
}

TEST(BandwidthReferenceTest, NoiseOfALargeSetKeepsItsTailHealthy) {
  // 40 healthy values spread +-15% around 100: their low tail is under the 10% ratio, but within
  // the noise; one value at 40 is beyond it.
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(85 + (i * 7919 % 31));
  v.push_back(40);
  BandwidthReference r = JudgeBandwidths(v, 0.1, 4);
  ASSERT_TRUE(r.noise_known);
  EXPECT_GE(r.Ratio(85), 1.1);
  EXPECT_FALSE(r.Slow(85)) << "sigma " << r.noise_sigma << " median " << r.healthy_median;
  EXPECT_TRUE(r.Slow(40));
  // With the noise test off, the ratio alone decides.
  EXPECT_TRUE(JudgeBandwidths(v, 0.1, 0).Slow(85));
}

TEST(BandwidthReferenceTest, EmptyGivesNoReference) {
  EXPECT_EQ(JudgeBandwidths({}, 0.1, 4).reference, 0);
}

}  // namespace
}  // namespace falcon::analysis::detect
