#include "analysis/detect/online_detector.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;

// Multiplicative Gaussian noise with the given coefficient of variation around `level(i)`.
template <typename Level>
std::vector<double> Series(int n, double cv, uint32_t seed, Level level) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, cv);
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = level(i) * (1.0 + noise(rng));
  return out;
}

std::vector<DetectorEvent> Feed(OnlineDetector& d, const std::vector<double>& xs) {
  std::vector<DetectorEvent> events;
  for (size_t i = 0; i < xs.size(); ++i) {
    absl::StatusOr<std::optional<DetectorEvent>> e = d.AddValue(static_cast<int64_t>(i), xs[i]);
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok() && e->has_value()) events.push_back(**e);
  }
  return events;
}

TEST(OnlineDetectorTest, TenPercentStepIsFoundWithinFiveIterations) {
  // A 10% step sits exactly on the default 10% verification threshold, where the measured ratio
  // of a few noisy samples falls on either side by chance; verify at 5% to test detection speed.
  OnlineDetectorOptions o;
  o.thresholds.verification_ratio = 0.05;
  int found = 0;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(o);
    const auto xs = Series(260, 0.03, seed, [](int i) { return i < 200 ? 1.0 : 1.1; });
    const auto events = Feed(d, xs);
    ASSERT_FALSE(events.empty()) << "seed " << seed;
    const DetectorEvent& e = events.front();
    EXPECT_EQ(e.kind, ChangeKind::kSlowdown) << "seed " << seed;
    EXPECT_NEAR(e.iteration, 200, 2) << "seed " << seed;
    EXPECT_GE(e.decided_at, e.iteration + o.min_after - 1);
    if (e.decided_at <= 205 && std::abs(e.iteration - 200) <= 2) ++found;
  }
  EXPECT_GE(found, 95);
}

TEST(OnlineDetectorTest, FifteenPercentStepPassesDefaultVerificationWithinSix) {
  for (uint32_t seed = 0; seed < 100; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    const auto events =
        Feed(d, Series(260, 0.03, seed, [](int i) { return i < 200 ? 1.0 : 1.15; }));
    ASSERT_EQ(events.size(), 1u) << "seed " << seed;
    // Decided at the 5th observation at the new level at the earliest (min_after).
    EXPECT_GE(events[0].decided_at, 204) << "seed " << seed;
    EXPECT_LE(events[0].decided_at, 206) << "seed " << seed;
    EXPECT_NEAR(events[0].ratio, 1.15, 0.05);
    EXPECT_GT(events[0].probability, 0.9);
  }
}

TEST(OnlineDetectorTest, StationaryNoiseGivesNoEvent) {
  for (uint32_t seed = 0; seed < 3; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    EXPECT_TRUE(Feed(d, Series(10000, 0.03, 100 + seed, [](int) { return 1.0; })).empty());
  }
}

TEST(OnlineDetectorTest, OnsetThenRecoveryWithDecisionIterations) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  // Iterations are numbered from 1000 in steps of 10 (sampled every 10th iteration).
  const auto xs = Series(300, 0.02, 7, [](int i) { return i >= 150 && i < 200 ? 1.5 : 1.0; });
  std::vector<DetectorEvent> events;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto e = *d.Add(1000 + 10 * static_cast<int64_t>(i), absl::Seconds(xs[i]));
    if (e.has_value()) events.push_back(*e);
    if (i == 170) {
      EXPECT_TRUE(d.in_slowdown());
    }
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, ChangeKind::kSlowdown);
  EXPECT_EQ(events[0].iteration, 1000 + 10 * 150);
  EXPECT_GE(events[0].decided_at, events[0].iteration + 40);  // min_after = 5 observations.
  EXPECT_LE(events[0].decided_at, events[0].iteration + 50);
  EXPECT_NEAR(events[0].mean_before, 1.0, 0.01);
  EXPECT_NEAR(events[0].mean_after, 1.5, 0.05);
  // The latest kPersistence observations at the decision, oldest first.
  ASSERT_EQ(events[0].latest.size(), 3u);
  const size_t decided = static_cast<size_t>((events[0].decided_at - 1000) / 10);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(events[0].latest[k], xs[decided - 2 + k], 1e-9);
  EXPECT_EQ(events[1].kind, ChangeKind::kRecovery);
  EXPECT_EQ(events[1].iteration, 1000 + 10 * 200);
  EXPECT_FALSE(d.in_slowdown());
  EXPECT_NEAR(d.healthy_level(), 1.0, 0.01);
}

TEST(OnlineDetectorTest, SingleSpikesAreNotSlowdowns) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  auto xs = Series(400, 0.02, 9, [](int) { return 1.0; });
  for (int i = 50; i < 400; i += 37) xs[i] *= 2.5;  // GC pauses.
  EXPECT_TRUE(Feed(d, xs).empty());
}

TEST(OnlineDetectorTest, BurstsOfThreeIterationsAreNotChanges) {
  // A rank preempted by the OS for 3 iterations slows the job x1.5 for 3 iterations: the new
  // level no longer holds when the 5th observation after its start comes in.
  for (uint32_t seed = 0; seed < 100; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    auto xs = Series(300, 0.05, 200 + seed, [](int i) { return i >= 150 && i < 153 ? 1.5 : 1.0; });
    EXPECT_TRUE(Feed(d, xs).empty()) << "seed " << seed;
  }
}

TEST(OnlineDetectorTest, AnEventNamesTheStretchBeforeItsChange) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  const auto events = Feed(d, Series(400, 0.02, 11, [](int i) {
                             return i < 100 ? 1.0 : i < 300 ? 1.3 : 1.0;
                           }));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].before_iteration, 0);  // The series start (fewer than `window` before).
  EXPECT_EQ(events[1].kind, ChangeKind::kRecovery);
  // The previous kept change, at most `window` (100) observations back.
  EXPECT_EQ(events[1].before_iteration, std::max<int64_t>(events[0].iteration, 200));
}

TEST(OnlineDetectorTest, NoDecisionDuringWarmup) {
  OnlineDetectorOptions o;
  o.warmup = 50;
  OnlineDetector d = *OnlineDetector::Create(o);
  const auto events = Feed(d, Series(120, 0.02, 3, [](int i) { return i < 30 ? 1.0 : 2.0; }));
  for (const auto& e : events) EXPECT_GE(e.decided_at, 50);
  EXPECT_TRUE(d.warmed_up());
}

// A job's slow start (17 of its first 20 iterations at x1.3-2 of its steady level, as a netns run
// measured) must not set the standardization: the warm-up waits for the series to settle, and a
// later x1.35 step is found where it happens. Standardized on the first 20, the deviation came out
// ~8x the steady noise and the step was never proposed.
TEST(OnlineDetectorTest, ASlowStartDoesNotBlindTheDetector) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    std::vector<double> xs = Series(300, 0.03, seed, [](int i) { return i < 64 ? 1.0 : 1.35; });
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> slow(1.3, 2.0);
    for (int i = 0; i < 17; ++i) xs[i] = slow(rng);
    const auto events = Feed(d, xs);
    ASSERT_FALSE(events.empty()) << "seed " << seed;
    EXPECT_EQ(events.front().kind, ChangeKind::kSlowdown) << "seed " << seed;
    EXPECT_NEAR(events.front().iteration, 64, 2) << "seed " << seed;
    // The stretch before the change starts after the dropped slow start.
    EXPECT_GE(events.front().before_iteration, 10) << "seed " << seed;
  }
}

TEST(OnlineDetectorTest, AChangeSoonAfterAKeptOneIsFoundAtTheGap) {
  // As in a netns cluster's link-cap run (pytorch_e2e): the job sped up at iteration 66 (a
  // speed-up, kept; 11% there, 15% here so that every seed keeps it) and the cap slowed it x1.7
  // at 75, 9 observations later. The slowdown is kept at the first observation min_gap (10)
  // allows, 76, not missed once it aged past `lag`. Its stretch before ends at the proposed
  // start: the level before is the faster one, and the ratio the step's.
  for (uint32_t seed = 0; seed < 20; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    const auto events = Feed(d, Series(160, 0.03, seed, [](int i) {
                               return i < 66 ? 0.47 : i < 75 ? 0.40 : 0.70;
                             }));
    ASSERT_EQ(events.size(), 2u) << "seed " << seed;
    EXPECT_EQ(events[0].kind, ChangeKind::kSpeedup) << "seed " << seed;
    EXPECT_NEAR(events[0].iteration, 66, 1) << "seed " << seed;
    EXPECT_EQ(events[1].kind, ChangeKind::kSlowdown) << "seed " << seed;
    EXPECT_EQ(events[1].iteration, std::max<int64_t>(75, events[0].iteration + 10))
        << "seed " << seed;
    EXPECT_LE(events[1].decided_at, events[1].iteration + 6) << "seed " << seed;
    EXPECT_NEAR(events[1].mean_before, 0.40, 0.02) << "seed " << seed;
    EXPECT_NEAR(events[1].ratio, 0.70 / 0.40, 0.1) << "seed " << seed;
  }
}

// A relapse 6 observations after a kept recovery: the stretch before is those 6 observations at
// the recovered level, so a x1.2 relapse is found and its level before is the recovered one.
TEST(OnlineDetectorTest, ARelapseSoonAfterARecoveryIsFound) {
  int found = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
    const auto events = Feed(d, Series(400, 0.03, seed, [](int i) {
                               return i < 200 ? 1.0 : i < 300 ? 1.5 : i < 306 ? 1.0 : 1.2;
                             }));
    ASSERT_GE(events.size(), 2u) << "seed " << seed;
    EXPECT_EQ(events[1].kind, ChangeKind::kRecovery) << "seed " << seed;
    if (events.size() < 3) continue;
    EXPECT_EQ(events.size(), 3u) << "seed " << seed;
    EXPECT_EQ(events[2].kind, ChangeKind::kSlowdown) << "seed " << seed;
    EXPECT_NEAR(events[2].mean_before, 1.0, 0.05) << "seed " << seed;
    EXPECT_NEAR(events[2].ratio, 1.2, 0.05) << "seed " << seed;
    ++found;
  }
  EXPECT_GE(found, 18);
}

// A series that never settles within max_warmup is standardized on its latest `warmup`
// observations then, not left without a detector.
TEST(OnlineDetectorTest, AnUnsettledSeriesWarmsUpAtMaxWarmup) {
  OnlineDetectorOptions o;
  o.max_warmup = 60;
  OnlineDetector d = *OnlineDetector::Create(o);
  // A level that climbs 3% per iteration: the first quarter of any 20 sits ~20% below the median.
  for (int i = 0; i < 59; ++i) ASSERT_TRUE(d.AddValue(i, std::pow(1.03, i)).ok());
  EXPECT_FALSE(d.warmed_up());
  ASSERT_TRUE(d.AddValue(59, std::pow(1.03, 59)).ok());
  EXPECT_TRUE(d.warmed_up());
}

TEST(OnlineDetectorTest, ThresholdsCanChangeWhileRunning) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  DetectorThresholds t;
  t.verification_ratio = 0.5;  // Only a 50% change counts now.
  ASSERT_TRUE(d.SetThresholds(t).ok());
  EXPECT_TRUE(Feed(d, Series(300, 0.02, 4, [](int i) { return i < 150 ? 1.0 : 1.3; })).empty());
  t.min_gap = 0;
  EXPECT_THAT(d.SetThresholds(t).message(), HasSubstr("min_gap"));
  t = DetectorThresholds();
  t.change_probability = 1.0;
  EXPECT_THAT(d.SetThresholds(t).message(), HasSubstr("change_probability"));
}

TEST(OnlineDetectorTest, RejectsBadObservationsAndKeepsState) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  ASSERT_TRUE(d.AddValue(5, 1.0).ok());
  EXPECT_THAT(d.AddValue(5, 1.0).status().message(), HasSubstr("iteration 5"));
  EXPECT_THAT(d.AddValue(6, -1.0).status().message(), HasSubstr(">= 0"));
  EXPECT_THAT(d.AddValue(6, std::nan("")).status().message(), HasSubstr("iteration 6"));
  EXPECT_THAT(d.Add(6, absl::InfiniteDuration()).status().message(), HasSubstr("finite"));
  EXPECT_EQ(d.observations(), 1);
  EXPECT_TRUE(d.AddValue(6, 1.0).ok());
}

TEST(OnlineDetectorOptionsTest, ValidatesFields) {
  OnlineDetectorOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.min_after = o.lag + 1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("min_after"));
  o = OnlineDetectorOptions();
  o.warmup = 1;
  EXPECT_THAT(OnlineDetector::Create(o).status().message(), HasSubstr("warmup"));
  o = OnlineDetectorOptions();
  o.max_warmup = o.warmup - 1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("max_warmup"));
  o = OnlineDetectorOptions();
  o.thresholds.hazard = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("hazard"));
  o = OnlineDetectorOptions();
  o.recheck = -1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("recheck"));
}

// AR(1) noise as the fleet simulator's fit of the Alibaba PAI workers (deviation 1.5%, lag-1
// autocorrelation 0.6) around `level(i)`.
template <typename Level>
std::vector<double> CorrelatedSeries(int n, uint32_t seed, Level level) {
  std::mt19937 rng(seed);
  const double rho = 0.6, sd = 0.015;
  std::normal_distribution<double> innovation(0.0, sd * std::sqrt(1 - rho * rho));
  std::vector<double> out(n);
  double e = 0;
  for (int i = 0; i < n; ++i) {
    e = rho * e + innovation(rng);
    out[i] = level(i) * (1.0 + e);
  }
  return out;
}

// Counts the seeds whose first event is a slowdown starting at iteration 200-210 (BOCD may place a
// step in correlated noise a few iterations late).
int StepsFound(const OnlineDetectorOptions& o, double step, int seeds) {
  int found = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(o);
    const auto events = Feed(d, CorrelatedSeries(260, static_cast<uint32_t>(seed),
                                                 [&](int i) { return i < 200 ? 1.0 : step; }));
    if (!events.empty() && events.front().kind == ChangeKind::kSlowdown &&
        events.front().iteration >= 200 && events.front().iteration <= 210) {
      ++found;
    }
  }
  return found;
}

TEST(OnlineDetectorTest, ANearThresholdStepIsVerifiedAgainOnItsLongerStretch) {
  // A 12% step in correlated noise measures under 10% over its first few iterations now and then;
  // the proposal is dropped and, without a recheck, BOCD never proposes the level again (three of
  // the 64 faults of a mixed fleet run were missed so).
  OnlineDetectorOptions o;
  o.min_after = 3;
  o.recheck = 60;
  const int with_recheck = StepsFound(o, 1.12, 300);
  o.recheck = 0;
  const int without = StepsFound(o, 1.12, 300);
  EXPECT_EQ(with_recheck, 300);
  EXPECT_LT(without, with_recheck);
}

TEST(OnlineDetectorTest, TheRecheckDoesNotPassAStepBelowTheThreshold) {
  OnlineDetectorOptions o;
  o.min_after = 3;
  o.recheck = 60;
  EXPECT_EQ(StepsFound(o, 1.07, 300), 0);
  for (int seed = 0; seed < 300; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(o);
    EXPECT_THAT(
        Feed(d, CorrelatedSeries(400, static_cast<uint32_t>(seed), [](int) { return 1.0; })),
        ::testing::IsEmpty())
        << "seed " << seed;
  }
}

TEST(OnlineDetectorTest, ABurstThatIsOverIsNotPassedByTheRecheck) {
  // Ten iterations at +11% just over the threshold, then back: whatever try measured them short,
  // the recheck's longer stretch holds the healthy level again and the persistence test fails.
  OnlineDetectorOptions o;
  o.min_after = 3;
  o.recheck = 60;
  int slowdowns_after_burst = 0;
  for (int seed = 0; seed < 100; ++seed) {
    OnlineDetector d = *OnlineDetector::Create(o);
    for (const DetectorEvent& e :
         Feed(d, CorrelatedSeries(300, static_cast<uint32_t>(seed),
                                  [](int i) { return i >= 200 && i < 210 ? 1.11 : 1.0; }))) {
      if (e.kind == ChangeKind::kSlowdown && e.decided_at >= 211) ++slowdowns_after_burst;
    }
  }
  EXPECT_EQ(slowdowns_after_burst, 0);
}

TEST(OnlineDetectorTest, MemoryIsBounded) {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  Feed(d, Series(2000, 0.03, 1, [](int) { return 1.0; }));
  const size_t after_2000 = d.MemoryBytes();
  for (int i = 2000; i < 20000; ++i) ASSERT_TRUE(d.AddValue(i, 1.0 + 0.01 * (i % 7)).ok());
  EXPECT_EQ(d.MemoryBytes(), after_2000);
  EXPECT_LT(after_2000, 16u * 1024);
}

TEST(DetectorBankTest, SeriesPerRankAndJobWithJobThresholds) {
  DetectorBank bank = *DetectorBank::Create(OnlineDetectorOptions());
  DetectorThresholds strict;
  strict.verification_ratio = 1.0;
  ASSERT_TRUE(bank.SetThresholds("quiet", strict).ok());
  const auto xs = Series(300, 0.02, 5, [](int i) { return i < 150 ? 1.0 : 1.4; });
  int events_loud = 0, events_quiet = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const absl::Duration t = absl::Seconds(xs[i]);
    for (int64_t rank : {SeriesKey::kJobSeries, int64_t{0}, int64_t{1}}) {
      if (bank.Add({"loud", rank}, static_cast<int64_t>(i), t)->has_value()) ++events_loud;
      if (bank.Add({"quiet", rank}, static_cast<int64_t>(i), t)->has_value()) ++events_quiet;
    }
  }
  EXPECT_EQ(events_loud, 3);
  EXPECT_EQ(events_quiet, 0);
  EXPECT_EQ(bank.size(), 6u);
  EXPECT_EQ(bank.Thresholds("quiet").verification_ratio, 1.0);
  EXPECT_EQ(bank.Thresholds("other").verification_ratio, 0.10);
  ASSERT_NE(bank.Find({"loud", 1}), nullptr);
  EXPECT_TRUE(bank.Find({"loud", 1})->in_slowdown());
  bank.RemoveJob("loud");
  EXPECT_EQ(bank.size(), 3u);
  EXPECT_EQ(bank.Find({"loud", 1}), nullptr);
  EXPECT_FALSE(bank.SetThresholds("quiet", DetectorThresholds{0, 10, 0.1, 0.9}).ok());
}

}  // namespace
}  // namespace falcon::analysis::detect
