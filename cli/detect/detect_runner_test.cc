#include "cli/detect/detect_runner.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cli::detect {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

NamedSeries Steps(const std::string& name, std::vector<std::pair<int, double>> runs) {
  NamedSeries s;
  s.name = name;
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 0.01);
  for (const auto& [n, level] : runs) {
    for (int i = 0; i < n; ++i) {
      s.values.push_back(level * (1 + noise(rng)));
      s.origins.push_back("line " + std::to_string(s.values.size() + 1));
    }
  }
  return s;
}

TEST(RunDetectTest, VerifiedChangePointsAsJson) {
  DetectInput in{"x.csv", {Steps("time", {{100, 1.0}, {40, 1.5}, {60, 1.0}})}, {}, {}};
  const json out = *RunDetect(in, DetectOptions());
  ASSERT_EQ(out["series"].size(), 1u);
  EXPECT_EQ(out["series"][0]["name"], "time");
  const json& cps = out["series"][0]["change_points"];
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_EQ(cps[0]["index"], 100);
  EXPECT_EQ(cps[0]["kind"], "slowdown");
  EXPECT_NEAR(cps[0]["ratio"].get<double>(), 1.5, 0.02);
  EXPECT_GT(cps[0]["probability"].get<double>(), 0.9);
  EXPECT_EQ(cps[1]["index"], 140);
  EXPECT_EQ(cps[1]["kind"], "recovery");
  EXPECT_FALSE(out.contains("blame"));
  EXPECT_THAT(FormatReport(out), HasSubstr("time: 2 change point(s)"));
}

TEST(RunDetectTest, ChangesBelowMinProbabilityAreListedApart) {
  DetectInput in{"x.csv", {Steps("time", {{100, 1.0}, {40, 1.5}, {60, 1.0}})}, {}, {}};
  DetectOptions options;
  EXPECT_DOUBLE_EQ(options.min_probability, 0.9);  // The online detector's change_probability.
  options.min_probability = 1.0;                   // Nothing reaches it.
  const json out = *RunDetect(in, options);
  EXPECT_TRUE(out["series"][0]["change_points"].empty()) << out;
  ASSERT_EQ(out["series"][0]["below_min_probability"].size(), 2u) << out;
  EXPECT_EQ(out["series"][0]["below_min_probability"][0]["index"], 100) << out;
  EXPECT_EQ(out["series"][0]["below_min_probability"][0]["kind"], "slowdown") << out;
  EXPECT_THAT(FormatReport(out),
              HasSubstr("time: 0 change point(s) (2 more below change probability 1.00 left out"));
  options.min_probability = 0;
  EXPECT_EQ((*RunDetect(in, options))["series"][0]["change_points"].size(), 2u);
  options.min_probability = 1.5;
  EXPECT_THAT(std::string(RunDetect(in, options).status().message()), HasSubstr("min_probability"));
}

TEST(RunDetectTest, HugeAndTinySecondsGiveTheSameChangePoints) {
  // Finite values are valid at any scale: z-scoring makes the analysis unit-free.
  const NamedSeries base = Steps("time", {{100, 1.0}, {40, 1.5}, {60, 1.0}});
  for (double scale : {1e200, 1e306, 1e-300}) {
    NamedSeries s = base;
    for (double& v : s.values) v *= scale;
    absl::StatusOr<json> out = RunDetect({"x.csv", {s}, {}, {}}, DetectOptions());
    ASSERT_TRUE(out.ok()) << scale << ": " << out.status();
    const json& cps = (*out)["series"][0]["change_points"];
    ASSERT_EQ(cps.size(), 2u) << scale << ": " << out->dump();
    EXPECT_EQ(cps[0]["index"], 100);
    EXPECT_EQ(cps[0]["kind"], "slowdown");
    EXPECT_NEAR(cps[0]["ratio"].get<double>(), 1.5, 0.02);
    EXPECT_EQ(cps[1]["index"], 140);
    EXPECT_EQ(cps[1]["kind"], "recovery");
    DetectOptions raw;
    raw.raw = true;
    out = RunDetect({"x.csv", {s}, {}, {}}, raw);
    ASSERT_TRUE(out.ok()) << scale << ": " << out.status();
    ASSERT_GE((*out)["series"][0]["change_points"].size(), 2u) << out->dump();
    EXPECT_EQ((*out)["series"][0]["change_points"][1]["index"], 100) << out->dump();
    EXPECT_NEAR((*out)["series"][0]["change_points"][1]["ratio"].get<double>(), 1.5, 0.02);
  }
  // Without z-scoring BOCD sees the raw values; squares of 1e200 overflow its model, so that is
  // an error naming the value, not a silent answer.
  NamedSeries s = base;
  s.values[3] = 1e200;
  DetectOptions o;
  o.zscore = false;
  EXPECT_THAT(RunDetect({"x.csv", {s}, {}, {}}, o).status().message(),
              HasSubstr("series \"time\" line 5: 1e+200 is too large for BOCD without z-scoring"));
}

TEST(RunDetectTest, RawKeepsIndexZeroAndSignedValues) {
  NamedSeries s = Steps("v", {{50, 1.0}, {50, 3.0}});
  for (double& v : s.values) v -= 2.0;  // Negative values are fine without verification.
  DetectOptions o;
  o.raw = true;
  o.expected_run_length = 100;
  const json out = *RunDetect({"x", {s}, {}, {}}, o);
  const json& cps = out["series"][0]["change_points"];
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_EQ(cps[0]["index"], 0);
  EXPECT_EQ(cps[0]["kind"], "raw");
  EXPECT_EQ(cps[0]["ratio"], 1.0);
  EXPECT_EQ(cps[1]["index"], 50);
  EXPECT_NEAR(cps[1]["ratio"].get<double>(), -1.0, 0.05);  // Mean -1 -> +1.
}

TEST(RunDetectTest, BadInputNamesSeriesAndOrigin) {
  NamedSeries s = Steps("iter", {{30, 1.0}});
  s.values[7] = -0.5;
  EXPECT_THAT(RunDetect({"x", {s}, {}, {}}, DetectOptions()).status().message(),
              HasSubstr("series \"iter\" line 9: negative time -0.5"));
  EXPECT_THAT(
      RunDetect({"x", {NamedSeries{"e", {}, {}}}, {}, {}}, DetectOptions()).status().message(),
      HasSubstr("series \"e\" is empty"));
  DetectOptions o;
  o.expected_run_length = 0.01;
  EXPECT_THAT(RunDetect({"x", {Steps("a", {{5, 1}})}, {}, {}}, o).status().message(),
              HasSubstr("expected run length must be > 1"));
  o = DetectOptions();
  o.prior.k = 0;
  EXPECT_THAT(RunDetect({"x", {Steps("a", {{5, 1}})}, {}, {}}, o).status().message(),
              HasSubstr("prior.k"));
  EXPECT_THAT(RunDetect({"x", {}, {}, {}}, DetectOptions()).status().message(),
              HasSubstr("no series"));
}

TEST(RunDetectTest, BlameForStepInput) {
  analysis::detect::BlameInput step;
  step.step = 3;
  for (int r = 0; r < 4; ++r) {
    step.ranks.push_back({r, 0, absl::Seconds(r == 2 ? 2.0 : 1.0)});
  }
  DetectInput in{"x", {Steps("rank_0", {{20, 1.0}})}, {step}, {}};
  const json out = *RunDetect(in, DetectOptions());
  ASSERT_EQ(out["blame"].size(), 1u);
  EXPECT_EQ(out["blame"][0],
            (json{{"step", 3}, {"rank", 2}, {"cause", "compute"}, {"ratio", 2.0}}));
  EXPECT_THAT(FormatReport(out), HasSubstr("rank     2  compute"));
}

}  // namespace
}  // namespace falcon::cli::detect
