#include "agent/backoff.h"

#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

TEST(BackoffTest, GrowsExponentiallyUpToTheCapWithoutJitter) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(100);
  o.max = absl::Seconds(1);
  o.multiplier = 2;
  o.jitter = 0;
  Backoff b(o);
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  EXPECT_EQ(b.Next(), absl::Milliseconds(800));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysInBandAndIsSeeded) {
  Backoff::Options o;
  o.initial = absl::Seconds(1);
  o.max = absl::Seconds(1);
  o.jitter = 0.2;
  o.seed = 42;
  Backoff a(o);
  Backoff same(o);
  o.seed = 43;
  Backoff other(o);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = a.Next();
    EXPECT_GE(d, absl::Milliseconds(800));
    EXPECT_LE(d, absl::Milliseconds(1200));
    EXPECT_EQ(d, same.Next());
    differs = differs || d != other.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(BackoffTest, ValidateNamesTheOption) {
  Backoff::Options o;
  o.initial = absl::ZeroDuration();
  EXPECT_EQ(Backoff::Validate(o).message(), "backoff_initial: must be > 0");
  o = {};
  o.max = absl::Milliseconds(1);
  EXPECT_EQ(Backoff::Validate(o).message(), "backoff_max: must be >= backoff_initial");
  o = {};
  o.jitter = 1;
  EXPECT_EQ(Backoff::Validate(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Backoff::Validate({}).ok());
}

}  // namespace
}  // namespace falcon::agent
