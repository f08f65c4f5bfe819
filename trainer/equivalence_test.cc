// Multi-process tests (real processes, Gloo over loopback): the hybrid-parallel trainer computes
// the same updates as a single rank, whatever the layout, the S2 micro-batch plan or the S2L
// layer split.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

using ::testing::HasSubstr;
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

// A DP=2 x PP=2 job of 8 blocks and M = 8 (even: 4+4 blocks and 4 micro-batches per pipeline).
JobSpec SplitJob(int64_t steps) {
  JobSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  spec.micro_batches = 8;
  spec.steps = steps;
  spec.model.num_blocks = 8;
  return spec;
}

// One scripted layer_split directive line.
std::string LayerSplitLine(int id, int at, int version, const std::string& dp0,
                           const std::string& dp1, const std::string& micro_batches) {
  return absl::StrCat(
      R"({"directive": {"directive_id": )", id, R"(, "effective_iteration": )", at,
      R"(, "plan_version": )", version, R"(, "layer_split": {"replicas": [{"stage_blocks": [)", dp0,
      R"(]}, {"stage_blocks": [)", dp1, R"(]}], "micro_batches": [)", micro_batches, "]}}}\n");
}

// The split S2L puts in force at iteration 2: DP group 0's stage 0 gives one block to its stage 1,
// DP group 1's stage 1 one to its stage 0, with an uneven micro-batch plan.
const std::vector<int> kSplit0 = {3, 5}, kSplit1 = {5, 3}, kEven = {4, 4};

TEST(EquivalenceTest, LayerSplitAndItsRevertGiveTheEvenTrajectory) {
  const JobSpec even = SplitJob(7);
  const JobRun a = RunJob(even, "split-even");
  ASSERT_TRUE(a.ok()) << common::testing::Describe(a.exits);

  // Split at 2; an S2 plan at 4 keeps the split; the controller's revert (the previous split and
  // micro-batches) at 5.
  JobSpec mitigated = even;
  mitigated.directives =
      LayerSplitLine(1, 2, 1, "3, 5", "5, 3", "3, 5") +
      R"({"directive": {"directive_id": 2, "effective_iteration": 4, "plan_version": 2,)"
      R"( "micro_batch_plan": {"micro_batches": [2, 6]}}})"
      "\n" +
      LayerSplitLine(3, 5, 3, "4, 4", "4, 4", "4, 4");
  const JobRun b = RunJob(mitigated, "split-mitigated");
  ASSERT_TRUE(b.ok()) << common::testing::Describe(b.exits);

  // The same update: final parameters and the loss of every iteration on every rank.
  const auto pa = ReadParams(a.checkpoint_dir, even.model);
  ASSERT_FALSE(pa.empty());
  const double diff = MaxRelativeDiff(ReadParams(b.checkpoint_dir, even.model), pa);
  EXPECT_LT(diff, kTolerance);
  std::printf("max relative difference split+revert vs even: %g\n", diff);
  const std::vector<double> curve = testing::LossCurve(ReadJsonLines(a.json_log));
  ASSERT_EQ(curve.size(), 7u);
  const auto log = ReadJsonLines(b.json_log);
  ASSERT_EQ(log.size(), 4u * 7u);
  for (const auto& line : log) {
    const int64_t it = line["iteration"];
    const int dp = line["dp"];
    EXPECT_NEAR(line["loss"].get<double>(), curve[it], kTolerance * std::abs(curve[it]))
        << line.dump();
    // The split and plan in force, switched by every rank at the same iterations.
    const bool split = it >= 2 && it < 5;
    EXPECT_EQ(line["stage_blocks"].get<std::vector<int>>(),
              split ? (dp == 0 ? kSplit0 : kSplit1) : kEven)
        << line.dump();
    const int m = it < 2 || it >= 5 ? 4 : it < 4 ? (dp == 0 ? 3 : 5) : (dp == 0 ? 2 : 6);
    EXPECT_EQ(line["micro_batches"], m) << line.dump();
    EXPECT_EQ(line["plan_version"], it < 2 ? 0 : it < 4 ? 1 : it < 5 ? 2 : 3) << line.dump();
    if (it == 2 || it == 5) {
      EXPECT_GT(line["pause_s"].get<double>(), 0) << line.dump();
    }
  }
  // Every rank acked each directive as applied at its iteration, the split's with what moved.
  const int64_t two_blocks = 2 * BlockStateBytes(even.model);
  int applied = 0;
  for (const auto& e : ReadJsonLines(b.events)) {
    EXPECT_EQ(e["status"], "ACK_STATUS_APPLIED") << e.dump();
    const std::string reason = e["reason"];
    const int id = e["directive_id"];
    EXPECT_EQ(e["applied_iteration"], id == 1 ? 2 : id == 2 ? 4 : 5);
    if (id == 1) {
      EXPECT_THAT(reason, HasSubstr(absl::StrCat(
                              "layer split dp0 3+5, dp1 5+3; micro-batches per DP group: 3,5; "
                              "moved 2 block copies; bytes_moved=",
                              two_blocks, "; move_s=")));
      EXPECT_THAT(reason, HasSubstr("; pause_s="));
    } else if (id == 3) {
      EXPECT_THAT(reason, HasSubstr(absl::StrCat("layer split even; micro-batches per DP group: "
                                                 "4,4; moved 2 block copies; bytes_moved=",
                                                 two_blocks, ";")));
    }
    ++applied;
  }
  EXPECT_EQ(applied, 3 * 4);
}

TEST(EquivalenceTest, CheckpointKeepsTheLayerSplitInForce) {
  // Split at 2, checkpoint at 4, resume to 6: the same as running to 6 at once.
  JobSpec first = SplitJob(4);
  first.directives = LayerSplitLine(1, 2, 1, "3, 5", "5, 3", "3, 5");
  const JobRun a = RunJob(first, "split-first");
  ASSERT_TRUE(a.ok()) << common::testing::Describe(a.exits);
  absl::StatusOr<checkpoint::CheckpointManifest> manifest =
      checkpoint::ReadManifest(a.checkpoint_dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->layer_split, (std::vector<std::vector<int>>{kSplit0, kSplit1}));

  JobSpec resumed = SplitJob(6);
  resumed.resume_dir = a.checkpoint_dir;
  const JobRun b = RunJob(resumed, "split-resumed");
  ASSERT_TRUE(b.ok()) << common::testing::Describe(b.exits);
  const auto log = ReadJsonLines(b.json_log);
  ASSERT_EQ(log.size(), 4u * 2u);
  for (const auto& line : log) {
    const int dp = line["dp"];
    EXPECT_EQ(line["stage_blocks"].get<std::vector<int>>(), dp == 0 ? kSplit0 : kSplit1)
        << line.dump();
    EXPECT_EQ(line["micro_batches"], dp == 0 ? 3 : 5) << line.dump();
    EXPECT_EQ(line["plan_version"], 1) << line.dump();
  }

  JobSpec whole = SplitJob(6);
  whole.directives = first.directives;
  const JobRun c = RunJob(whole, "split-whole");
  ASSERT_TRUE(c.ok()) << common::testing::Describe(c.exits);
  EXPECT_LT(MaxRelativeDiff(ReadParams(b.checkpoint_dir, whole.model),
                            ReadParams(c.checkpoint_dir, whole.model)),
            kTolerance);
}

TEST(EquivalenceTest, MalformedLayerSplitIsRejectedNamingTheField) {
  JobSpec spec = SplitJob(3);
  spec.directives = LayerSplitLine(4, 1, 1, "3, 5", "4, 3", "3, 5");
  const JobRun run = RunJob(spec, "split-rejected");
  ASSERT_TRUE(run.ok()) << common::testing::Describe(run.exits);
  int rejected = 0;
  for (const auto& e : ReadJsonLines(run.events)) {
    EXPECT_EQ(e["status"], "ACK_STATUS_REJECTED");
    EXPECT_THAT(e["reason"].get<std::string>(),
                HasSubstr("layer_split.replicas[1].stage_blocks sum to 7"));
    ++rejected;
  }
  EXPECT_EQ(rejected, 4);
  for (const auto& line : ReadJsonLines(run.json_log)) {
    EXPECT_EQ(line["stage_blocks"].get<std::vector<int>>(), kEven);
    EXPECT_EQ(line["plan_version"], 0);
  }
}

}  // namespace
}  // namespace falcon::trainer
