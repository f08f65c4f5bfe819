#include "trainer_shim/backoff.h"

#include "gtest/gtest.h"

namespace falcon::shim {
namespace {

TEST(BackoffTest, GrowsGeometricallyUpToTheCap) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(10);
  o.max = absl::Milliseconds(100);
  o.jitter = 0;
  Backoff b(o);
  EXPECT_EQ(b.Next(), absl::Milliseconds(10));
  EXPECT_EQ(b.Next(), absl::Milliseconds(20));
  EXPECT_EQ(b.Next(), absl::Milliseconds(40));
  EXPECT_EQ(b.Next(), absl::Milliseconds(80));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(10));
}

TEST(BackoffTest, JitterStaysInBandAndIsSeeded) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(100);
  o.max = absl::Seconds(100);
  o.multiplier = 1.0;
  o.jitter = 0.25;
  o.seed = 7;
  Backoff a(o), b(o);
  bool varied = false;
  absl::Duration first = a.Next();
  EXPECT_EQ(first, b.Next());
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = a.Next();
    EXPECT_EQ(d, b.Next()) << "same seed, same sequence";
    EXPECT_GE(d, absl::Milliseconds(75));
    EXPECT_LE(d, absl::Milliseconds(125));
    if (d != first) varied = true;
  }
  EXPECT_TRUE(varied);
}

TEST(BackoffTest, ValidateNamesTheField) {
  Backoff::Options o;
  o.initial = absl::ZeroDuration();
  EXPECT_NE(Backoff::Validate(o).message().find("initial"), std::string::npos);
  o = Backoff::Options();
  o.max = absl::Milliseconds(1);
  EXPECT_NE(Backoff::Validate(o).message().find("max"), std::string::npos);
  o = Backoff::Options();
  o.multiplier = 0.5;
  EXPECT_NE(Backoff::Validate(o).message().find("multiplier"), std::string::npos);
  o = Backoff::Options();
  o.jitter = 1.0;
  EXPECT_NE(Backoff::Validate(o).message().find("jitter"), std::string::npos);
  EXPECT_TRUE(Backoff::Validate(Backoff::Options()).ok());
}

}  // namespace
}  // namespace falcon::shim
