#include "agent/reduce/period_tracker.h"

#include <random>
#include <vector>

#include "agent/reduce/exact_period_finder.h"
#include "gtest/gtest.h"

namespace falcon::agent::reduce {
namespace {

constexpr int64_t kMs = 1000 * 1000;

// Feeds `iterations` repetitions of `pattern`, op j of iteration i starting at
// i * iteration_ns + j * 100 us; returns the boundaries reported.
std::vector<int64_t> Feed(PeriodTracker& tracker, const std::vector<int32_t>& pattern,
                          int iterations, int64_t iteration_ns, int64_t t0 = 0) {
  std::vector<int64_t> boundaries;
  for (int i = 0; i < iterations; ++i) {
    for (size_t j = 0; j < pattern.size(); ++j) {
      auto b = tracker.Add(pattern[j], t0 + i * iteration_ns + static_cast<int64_t>(j) * kMs / 10);
      if (b.has_value()) boundaries.push_back(*b);
    }
  }
  return boundaries;
}

void ExpectSpacing(const std::vector<int64_t>& b, int64_t iteration_ns) {
  ASSERT_GE(b.size(), 2u);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i] - b[i - 1], iteration_ns) << "at " << i;
}

TEST(PeriodTrackerTest, LocksOnCleanPatternAndReportsEveryIteration) {
  PeriodTracker tracker({}, ExactPeriodFinder());
  const std::vector<int32_t> pattern = {0, 1, 2, 3, 1};  // RS AG AR x AG ...
  auto b = Feed(tracker, pattern, 200, 10 * kMs);
  EXPECT_TRUE(tracker.locked());
  EXPECT_EQ(tracker.period(), 5);
  // Locks after min_window (256) ops = ~51 iterations, then one boundary per iteration.
  EXPECT_GE(b.size(), 140u);
  ExpectSpacing(b, 10 * kMs);
}

TEST(PeriodTrackerTest, StrayOpsDoNotMoveBoundaries) {
  PeriodTracker tracker({}, ExactPeriodFinder(200, 0.9));
  const std::vector<int32_t> pattern = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::mt19937 rng(7);
  std::vector<int64_t> b;
  for (int i = 0; i < 300; ++i) {
    for (size_t j = 0; j < pattern.size(); ++j) {
      const int64_t t = i * 20 * kMs + static_cast<int64_t>(j) * kMs;
      if (rng() % 300 == 0) tracker.Add(99, t + 1);  // A stray op (e.g. a checkpoint barrier).
      if (auto x = tracker.Add(pattern[j], t); x.has_value()) b.push_back(*x);
    }
  }
  EXPECT_TRUE(tracker.locked());
  ExpectSpacing(b, 20 * kMs);
}

TEST(PeriodTrackerTest, NoUniqueTokenUsesLongerAnchor) {
  PeriodTracker tracker({}, ExactPeriodFinder());
  const std::vector<int32_t> pattern = {0, 1, 0, 1, 2, 2};  // No token occurs once.
  auto b = Feed(tracker, pattern, 200, 7 * kMs);
  EXPECT_EQ(tracker.period(), 6);
  ExpectSpacing(b, 7 * kMs);
}

TEST(PeriodTrackerTest, RelocksWhenThePeriodChanges) {
  PeriodTracker::Options options;
  options.redetect_every = 512;
  PeriodTracker tracker(options, ExactPeriodFinder());
  const std::vector<int32_t> before = {0, 1, 2, 3};
  // After a micro-batch change, token 0 occurs twice per iteration, so the old anchor no longer
  // marks iterations.
  const std::vector<int32_t> after = {0, 1, 0, 1, 2, 3};
  Feed(tracker, before, 500, 10 * kMs);
  EXPECT_EQ(tracker.period(), 4);
  auto b = Feed(tracker, after, 1000, 15 * kMs, 500 * 10 * kMs);
  EXPECT_EQ(tracker.period(), 6);
  EXPECT_GE(tracker.relocks(), 1u);
  // The last 500 iterations are reported one per iteration.
  ASSERT_GE(b.size(), 500u);
  std::vector<int64_t> tail(b.end() - 500, b.end());
  ExpectSpacing(tail, 15 * kMs);
}

TEST(PeriodTrackerTest, NoPeriodNoBoundaries) {
  PeriodTracker tracker({}, ExactPeriodFinder());
  std::mt19937 rng(3);
  int boundaries = 0;
  for (int i = 0; i < 5000; ++i) boundaries += tracker.Add(rng() % 1000, i * kMs).has_value();
  EXPECT_FALSE(tracker.locked());
  EXPECT_EQ(boundaries, 0);
}

}  // namespace
}  // namespace falcon::agent::reduce
