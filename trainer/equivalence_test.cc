// Multi-process tests (real processes, Gloo over loopback): the hybrid-parallel trainer computes
// the same updates as a single rank, whatever the layout or the S2 micro-batch plan.
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

using testing::JobRun;
using testing::JobSpec;
using testing::MaxRelativeDiff;
using testing::ReadJsonLines;
using testing::ReadParams;
using testing::RunJob;

constexpr double kTolerance = 1e-5;

TEST(EquivalenceTest, DataAndPipelineParallelMatchOneRank) {
  JobSpec one;
  one.micro_batches = 4;
  one.steps = 5;
  const JobRun single = RunJob(one, "single");
  ASSERT_TRUE(single.ok()) << common::testing::Describe(single.exits);

  JobSpec hybrid = one;
  hybrid.dp = 2;
  hybrid.pp = 2;
  const JobRun parallel = RunJob(hybrid, "dp2pp2");
  ASSERT_TRUE(parallel.ok()) << common::testing::Describe(parallel.exits);

  const auto a = ReadParams(single.checkpoint_dir, one.model);
  const auto b = ReadParams(parallel.checkpoint_dir, one.model);
  ASSERT_FALSE(a.empty());
  const double diff = MaxRelativeDiff(b, a);
  EXPECT_LT(diff, kTolerance);
  std::printf("max relative difference DP2xPP2 vs 1x1: %g\n", diff);
  // Training moved the parameters (the comparison is not between two initial models).
  JobSpec zero = one;
  zero.steps = 0;
  const JobRun init = RunJob(zero, "init");
  ASSERT_TRUE(init.ok()) << common::testing::Describe(init.exits);
  EXPECT_GT(MaxRelativeDiff(ReadParams(init.checkpoint_dir, one.model), a), 20 * kTolerance);

  // One JSON line per iteration per rank, with the same loss everywhere.
  const auto log = ReadJsonLines(parallel.json_log);
  ASSERT_EQ(log.size(), 4u * 5u);
  const auto single_log = ReadJsonLines(single.json_log);
  const auto curve = testing::LossCurve(single_log);
  for (const auto& line : log) {
    for (const char* key : {"iteration", "rank", "loss", "iteration_time_s", "plan_version"}) {
      EXPECT_TRUE(line.contains(key)) << line.dump();
    }
    const int64_t it = line["iteration"];
    EXPECT_NEAR(line["loss"].get<double>(), curve[it], 1e-4);
    EXPECT_GT(line["iteration_time_s"].get<double>(), 0);
    EXPECT_EQ(line["plan_version"], 0);
    EXPECT_EQ(line["micro_batches"], 2);
  }
}

TEST(EquivalenceTest, UnevenMicroBatchPlanGivesTheEvenUpdate) {
  JobSpec even;
  even.dp = 2;
  even.pp = 2;
  even.micro_batches = 8;
  even.steps = 4;
  const JobRun a = RunJob(even, "even");
  ASSERT_TRUE(a.ok()) << common::testing::Describe(a.exits);

  JobSpec uneven = even;
  uneven.directives =
      R"({"directive": {"directive_id": 1, "effective_iteration": 1, "plan_version": 1,)"
      R"( "micro_batch_plan": {"micro_batches": [6, 2]}}})"
      "\n"
      R"({"directive": {"directive_id": 2, "effective_iteration": 3, "plan_version": 2,)"
      R"( "micro_batch_plan": {"micro_batches": [0, 8]}}})"
      "\n";
  const JobRun b = RunJob(uneven, "uneven");
  ASSERT_TRUE(b.ok()) << common::testing::Describe(b.exits);
  EXPECT_LT(MaxRelativeDiff(ReadParams(b.checkpoint_dir, even.model),
                            ReadParams(a.checkpoint_dir, even.model)),
            kTolerance);

  // Every rank switched plans at the same iteration and reports the plan version in force.
  for (const auto& line : ReadJsonLines(b.json_log)) {
    const int64_t it = line["iteration"];
    const int dp = line["dp"];
    const int expected_m = it < 1 ? 4 : it < 3 ? (dp == 0 ? 6 : 2) : (dp == 0 ? 0 : 8);
    EXPECT_EQ(line["micro_batches"], expected_m) << line.dump();
    EXPECT_EQ(line["plan_version"], it < 1 ? 0 : it < 3 ? 1 : 2) << line.dump();
  }
  // Each rank acked both directives as applied at their effective iteration.
  int applied = 0;
  for (const auto& e : ReadJsonLines(b.events)) {
    if (e["event"] != "ack") continue;
    EXPECT_EQ(e["status"], "ACK_STATUS_APPLIED") << e.dump();
    EXPECT_EQ(e["applied_iteration"], e["directive_id"] == 1 ? 1 : 3);
    ++applied;
  }
  EXPECT_EQ(applied, 8);
}

TEST(EquivalenceTest, InfeasiblePlanIsRejectedAndTrainingGoesOn) {
  JobSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  spec.micro_batches = 4;
  spec.steps = 3;
  spec.directives =
      R"({"directive": {"directive_id": 5, "effective_iteration": 1, "plan_version": 1,)"
      R"( "micro_batch_plan": {"micro_batches": [3, 1]}}})"
      "\n";
  const JobRun run = RunJob(spec, "rejected");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  int rejected = 0;
  for (const auto& e : ReadJsonLines(run.events)) {
    EXPECT_EQ(e["status"], "ACK_STATUS_REJECTED");
    EXPECT_NE(e["reason"].get<std::string>().find("micro_batches[0] = 3"), std::string::npos);
    ++rejected;
  }
  EXPECT_EQ(rejected, 4);
  for (const auto& line : ReadJsonLines(run.json_log)) EXPECT_EQ(line["plan_version"], 0);
}

}  // namespace
}  // namespace falcon::trainer
