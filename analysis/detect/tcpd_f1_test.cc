#include "analysis/detect/tcpd_f1.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;

// The test vectors of ../shared/real_data/README.md (from TCPDBench's metrics.py).
TEST(TcpdF1Test, ReadmeVectors) {
  EXPECT_DOUBLE_EQ(TcpdF1({{10, 20}, {11, 20}, {10}, {0, 5}}, {10, 20})->f1, 1.0);
  const F1Score one = *TcpdF1({{}, {10}, {50}}, {10});
  EXPECT_NEAR(one.f1, 0.90909, 1e-5);
  EXPECT_DOUBLE_EQ(one.precision, 1.0);
  EXPECT_NEAR(one.recall, 2.5 / 3, 1e-12);
  EXPECT_NEAR(TcpdF1({{}, {10}, {50}}, {})->f1, 0.8, 1e-12);
}

TEST(TcpdF1Test, MatchingIsOneToOneAndNearestFirst) {
  // One prediction between two annotations 4 apart serves only the first.
  const F1Score s = *TcpdF1({{10, 14}}, {12});
  EXPECT_DOUBLE_EQ(s.precision, 1.0);     // {0, 12} both match.
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3.0);  // {0, 10, 14}: 14 finds 12 used.
  // Outside the margin nothing matches except 0.
  EXPECT_DOUBLE_EQ(TcpdF1({{20}}, {26})->precision, 0.5);
  EXPECT_DOUBLE_EQ(TcpdF1({{20}}, {26}, 6)->precision, 1.0);
}

TEST(TcpdF1Test, RejectsBadInput) {
  EXPECT_THAT(TcpdF1({}, {1}).status().message(), HasSubstr("no annotators"));
  EXPECT_THAT(TcpdF1({{1}}, {-1}).status().message(), HasSubstr("-1"));
  EXPECT_THAT(TcpdF1({{1}, {-3}}, {1}).status().message(), HasSubstr("annotator 1"));
  EXPECT_FALSE(TcpdF1({{1}}, {1}, -1).ok());
}

}  // namespace
}  // namespace falcon::analysis::detect
