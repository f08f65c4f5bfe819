#include "analysis/detect/bocd.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Independent textbook BOCD in linear space, no pruning: the Student-t written with std::tgamma,
// R[t][r] kept in full. Used to check the log-space, pruned implementation.
std::vector<std::vector<double>> ReferencePosteriors(const std::vector<double>& xs,
                                                     const NormalGammaPrior& p, double h) {
  std::vector<double> mu = {p.m}, kappa = {p.k}, alpha = {p.a}, beta = {p.b};
  std::vector<double> r = {1.0};
  std::vector<std::vector<double>> out;
  for (double x : xs) {
    std::vector<double> pred(r.size());
    for (size_t i = 0; i < r.size(); ++i) {
      const double nu = 2 * alpha[i];
      const double s2 = beta[i] * (kappa[i] + 1) / (alpha[i] * kappa[i]);
      const double z = (x - mu[i]) * (x - mu[i]) / (nu * s2);
      pred[i] = std::tgamma((nu + 1) / 2) / std::tgamma(nu / 2) / std::sqrt(nu * M_PI * s2) *
                std::pow(1 + z, -(nu + 1) / 2);
    }
    std::vector<double> next(r.size() + 1, 0.0);
    double total = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      next[i + 1] = r[i] * pred[i] * (1 - h);
      next[0] += r[i] * pred[i] * h;
    }
    for (double v : next) total += v;
    for (double& v : next) v /= total;
    std::vector<double> mu2 = {p.m}, kappa2 = {p.k}, alpha2 = {p.a}, beta2 = {p.b};
    for (size_t i = 0; i < r.size(); ++i) {
      mu2.push_back((kappa[i] * mu[i] + x) / (kappa[i] + 1));
      kappa2.push_back(kappa[i] + 1);
      alpha2.push_back(alpha[i] + 0.5);
      beta2.push_back(beta[i] + kappa[i] * (x - mu[i]) * (x - mu[i]) / (2 * (kappa[i] + 1)));
    }
    mu = mu2, kappa = kappa2, alpha = alpha2, beta = beta2, r = next;
    out.push_back(r);
  }
  return out;
}

std::vector<double> Noise(int n, double mean, double sd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(mean, sd);
  std::vector<double> out(n);
  for (double& v : out) v = dist(rng);
  return out;
}

TEST(BocdOptionsTest, RejectsOutOfRangeFields) {
  BocdOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.hazard = 1.0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("hazard"));
  o = BocdOptions();
  o.prior.k = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("prior.k"));
  o = BocdOptions();
  o.prior.b = -1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("prior.b"));
  o = BocdOptions();
  o.max_hypotheses = 1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("max_hypotheses"));
  o = BocdOptions();
  o.prune_threshold = 1;
  EXPECT_EQ(Bocd::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

void ExpectMatchesReference(const NormalGammaPrior& prior, int n) {
  std::vector<double> xs = Noise(n, 0.0, 1.0, 7);
  for (int i = n / 2; i < n; ++i) xs[i] += 3.0;
  BocdOptions o;
  o.prior = prior;
  o.hazard = 0.05;
  o.prune_threshold = 0;
  o.max_hypotheses = 1000;
  Bocd bocd = *Bocd::Create(o);
  const auto ref = ReferencePosteriors(xs, o.prior, o.hazard);
  for (size_t t = 0; t < xs.size(); ++t) {
    ASSERT_TRUE(bocd.Update(xs[t]).ok());
    const auto post = bocd.Posterior();
    ASSERT_EQ(post.size(), ref[t].size());
    for (size_t r = 0; r < post.size(); ++r) {
      EXPECT_EQ(post[r].length, static_cast<int64_t>(r));
      EXPECT_NEAR(post[r].probability, ref[t][r], 1e-9) << "t=" << t << " r=" << r;
    }
  }
}

TEST(BocdTest, MatchesUnprunedReferenceRecursion) {
  ExpectMatchesReference({0.5, 0.3, 2.0, 1.5}, 40);
  // A large shape takes the asymptotic lgamma-ratio path.
  ExpectMatchesReference({0.0, 1.0, 40.0, 30.0}, 80);
}

TEST(BocdTest, ChangeAtNextObservationAlwaysHasProbabilityHazard) {
  BocdOptions o;
  o.hazard = 0.01;
  Bocd bocd = *Bocd::Create(o);
  for (double x : Noise(300, 0.0, 1.0, 3)) {
    ASSERT_TRUE(bocd.Update(x).ok());
    const auto post = bocd.Posterior();
    ASSERT_EQ(post.front().length, 0);
    EXPECT_NEAR(post.front().probability, 0.01, 1e-12);
  }
}

TEST(BocdTest, PruningAndCapBoundTheHypotheses) {
  BocdOptions o;
  o.max_hypotheses = 20;
  Bocd bocd = *Bocd::Create(o);
  double mass_lost = 0;
  for (double x : Noise(2000, 0.0, 1.0, 11)) {
    ASSERT_TRUE(bocd.Update(x).ok());
    EXPECT_LE(bocd.live_hypotheses(), 20);
    double total = 0;
    for (const auto& rl : bocd.Posterior()) total += rl.probability;
    mass_lost = std::max(mass_lost, 1 - total);
  }
  // The merge keeps the mass; only hypotheses below the threshold are dropped.
  EXPECT_LT(mass_lost, 20 * o.prune_threshold);
  // The merged longest run keeps growing: it is the run since the start of the series.
  EXPECT_EQ(bocd.Posterior().back().length, 2000);
}

TEST(BocdTest, LaggedProbabilityRisesAfterAStepAndPointsAtIt) {
  std::vector<double> xs = Noise(200, 0.0, 1.0, 5);
  const std::vector<double> after = Noise(10, 4.0, 1.0, 6);
  xs.insert(xs.end(), after.begin(), after.end());
  Bocd bocd = *Bocd::Create(BocdOptions());
  double max_before = 0;
  for (int t = 0; t < 200; ++t) {
    ASSERT_TRUE(bocd.Update(xs[t]).ok());
    if (t > 20) max_before = std::max(max_before, bocd.ChangeProbabilityWithin(10));
  }
  EXPECT_LT(max_before, 0.5);
  // Within 3 observations of the new level, the change is almost surely within the last 10, and
  // its most probable start is the step.
  for (int t = 200; t < 203; ++t) ASSERT_TRUE(bocd.Update(xs[t]).ok());
  EXPECT_GT(bocd.ChangeProbabilityWithin(10), 0.9);
  EXPECT_EQ(bocd.MostProbableRecentStart(10), 200);
  // Long after, the change is no longer recent.
  for (int t = 203; t < 210; ++t) ASSERT_TRUE(bocd.Update(xs[t]).ok());
  EXPECT_LT(bocd.ChangeProbabilityWithin(5), 0.1);
}

TEST(BocdTest, MapSegmentationFindsLevels) {
  std::vector<double> xs = Noise(60, 0.0, 1.0, 1);
  for (int i = 30; i < 60; ++i) xs[i] += 5.0;
  BocdOptions o;
  o.track_map = true;
  o.hazard = 0.01;
  Bocd bocd = *Bocd::Create(o);
  for (double x : xs) ASSERT_TRUE(bocd.Update(x).ok());
  EXPECT_THAT(*bocd.MapChangePoints(), ElementsAre(0, 30));
}

TEST(BocdTest, RejectsNonFiniteObservationNamingIt) {
  Bocd bocd = *Bocd::Create(BocdOptions());
  ASSERT_TRUE(bocd.Update(1.0).ok());
  const absl::Status s = bocd.Update(std::nan(""));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("observation 1"));
  EXPECT_EQ(bocd.count(), 1);
}

TEST(BocdTest, MapNeedsTracking) {
  Bocd bocd = *Bocd::Create(BocdOptions());
  ASSERT_TRUE(bocd.Update(1.0).ok());
  EXPECT_EQ(bocd.MapChangePoints().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BocdTest, SetHazardValidates) {
  Bocd bocd = *Bocd::Create(BocdOptions());
  EXPECT_FALSE(bocd.SetHazard(0).ok());
  ASSERT_TRUE(bocd.SetHazard(0.2).ok());
  ASSERT_TRUE(bocd.Update(0.0).ok());
  EXPECT_NEAR(bocd.Posterior().front().probability, 0.2, 1e-12);
}

TEST(ZScoreTest, StandardizesWithSampleDeviation) {
  const std::vector<double> z = *ZScore({1.0, 2.0, 3.0});
  EXPECT_THAT(z, ElementsAre(-1.0, 0.0, 1.0));
  EXPECT_THAT(*ZScore({5.0, 5.0}), ElementsAre(0.0, 0.0));
  EXPECT_FALSE(ZScore({1.0}).ok());
  EXPECT_THAT(ZScore({1.0, INFINITY}).status().message(), HasSubstr("value 1"));
}

TEST(ZScoreTest, HugeAndTinyFiniteValuesStandardizeLikeOrdinaryOnes) {
  // z-scores do not depend on the unit: seconds of 1e200 or 1e-300 are finite, valid input. The
  // plain sums overflow (1e308, squares of 1e200) or underflow (squares of 1e-300).
  for (double scale : {1e200, 1e307, 1e-300, 1e-310}) {
    absl::StatusOr<std::vector<double>> z = ZScore({1 * scale, 2 * scale, 3 * scale});
    ASSERT_TRUE(z.ok()) << scale << ": " << z.status();
    ASSERT_EQ(z->size(), 3u);
    EXPECT_NEAR((*z)[0], -1.0, 1e-9) << scale;
    EXPECT_NEAR((*z)[1], 0.0, 1e-9) << scale;
    EXPECT_NEAR((*z)[2], 1.0, 1e-9) << scale;
  }
  EXPECT_THAT(*ZScore({1e308, 1e308}), ElementsAre(0.0, 0.0));
  EXPECT_THAT(*ZScore({-1e308, 1e308}),
              ElementsAre(DoubleNear(-M_SQRT1_2, 1e-15), DoubleNear(M_SQRT1_2, 1e-15)));
}

TEST(SegmentSeriesTest, ZScoredSeriesGiveTheSameChangePointsAtAnyScale) {
  std::vector<double> xs = Noise(80, 100.0, 2.0, 9);
  for (int i = 40; i < 80; ++i) xs[i] += 20.0;
  SegmentOptions o;
  o.zscore = true;
  o.bocd.hazard = 0.01;
  const Segmentation want = *SegmentSeries(xs, o);
  for (double scale : {1e200, 1e306, 1e-300}) {
    std::vector<double> scaled = xs;
    for (double& x : scaled) x *= scale;
    absl::StatusOr<Segmentation> got = SegmentSeries(scaled, o);
    ASSERT_TRUE(got.ok()) << scale << ": " << got.status();
    EXPECT_EQ(got->change_points, want.change_points) << scale;
  }
  // Without z-scoring, values whose squares overflow the model are an error naming the value.
  o.zscore = false;
  xs[7] = -1e200;
  EXPECT_THAT(SegmentSeries(xs, o).status().message(),
              HasSubstr("value 7 (-1e+200) is too large for BOCD without z-scoring"));
}

TEST(SegmentSeriesTest, ReportsChangePointsWithProbabilities) {
  std::vector<double> xs = Noise(80, 100.0, 2.0, 9);
  for (int i = 40; i < 80; ++i) xs[i] += 20.0;
  SegmentOptions o;
  o.zscore = true;
  o.bocd.hazard = 0.01;
  const Segmentation seg = *SegmentSeries(xs, o);
  EXPECT_THAT(seg.change_points, ElementsAre(0, 40));
  ASSERT_EQ(seg.probabilities.size(), 2u);
  EXPECT_EQ(seg.probabilities[0], 1.0);
  EXPECT_GT(seg.probabilities[1], 0.9);
  EXPECT_EQ(seg.lagged_probability.size(), xs.size());
  EXPECT_EQ(SegmentSeries({}, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace falcon::analysis::detect
