#include "common/backoff.h"

#include "gtest/gtest.h"

namespace falcon::common {
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
  EXPECT_EQ(b.attempt(), 6);
  b.Reset();
  EXPECT_EQ(b.attempt(), 0);
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, ManyAttemptsStayAtTheCap) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(10);
  o.max = absl::Milliseconds(100);
  o.jitter = 0;
  Backoff b(o);
  for (int i = 0; i < 1000; ++i) EXPECT_LE(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterStaysInBandAndIsSeeded) {
  Backoff::Options o;
  o.initial = absl::Milliseconds(100);
  o.max = absl::Seconds(100);
  o.multiplier = 1.0;
  o.jitter = 0.25;
  o.seed = 42;
  Backoff a(o);
  Backoff same(o);
  o.seed = 43;
  Backoff other(o);
  bool differs = false;
  bool varied = false;
  const absl::Duration first = a.Next();
  EXPECT_EQ(first, same.Next());
  other.Next();
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = a.Next();
    EXPECT_GE(d, absl::Milliseconds(75));
    EXPECT_LE(d, absl::Milliseconds(125));
    EXPECT_EQ(d, same.Next()) << "same seed, same sequence";
    differs = differs || d != other.Next();
    varied = varied || d != first;
  }
  EXPECT_TRUE(differs);
  EXPECT_TRUE(varied);
}

TEST(BackoffTest, JitterNeverExceedsTheCap) {
  Backoff::Options o;
  o.initial = absl::Seconds(1);
  o.max = absl::Seconds(1);
  o.jitter = 0.2;
  Backoff b(o);
  bool below = false;
  for (int i = 0; i < 100; ++i) {
    const absl::Duration d = b.Next();
    EXPECT_GE(d, absl::Milliseconds(800));
    EXPECT_LE(d, absl::Seconds(1));
    below = below || d < absl::Seconds(1);
  }
  EXPECT_TRUE(below);
}

TEST(BackoffTest, ValidateNamesTheOptionWithThePrefix) {
  Backoff::Options o;
  o.initial = absl::ZeroDuration();
  EXPECT_EQ(Backoff::Validate(o, "backoff_").message(), "backoff_initial: must be > 0");
  o = {};
  o.max = absl::Milliseconds(1);
  EXPECT_EQ(Backoff::Validate(o, "backoff_").message(), "backoff_max: must be >= backoff_initial");
  o = {};
  o.multiplier = 0.5;
  EXPECT_EQ(Backoff::Validate(o, "options.backoff.").message(),
            "options.backoff.multiplier: must be >= 1");
  o = {};
  o.jitter = 1;
  EXPECT_EQ(Backoff::Validate(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Backoff::Validate(o).message(), "jitter: must be in [0, 1)");
  EXPECT_TRUE(Backoff::Validate({}).ok());
}

}  // namespace
}  // namespace falcon::common
