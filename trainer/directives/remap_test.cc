// S3: the remap plan (pure) and a topology change in the middle of a multi-process run.
#include "trainer/directives/remap.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/testing/job.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;

TEST(RemapPlanTest, SwappingTwoRanksMovesTheirStagesBetweenThem) {
  model::ModelConfig c = testing::SmallModel();
  c.vocab_size = 10;
  const analysis::plan::Layout from =
      *analysis::plan::Layout::Default(4, 2, 2);  // r0 (0,0) r1 (1,0) r2 (0,1) r3 (1,1)
  const analysis::plan::Layout to = *analysis::plan::Layout::Create(
      {{0, "", 0, 0, 0}, {1, "", 0, 1, 0}, {2, "", 1, 0, 0}, {3, "", 1, 1, 0}});
  const std::vector<LayerTransfer> plan = PlanRemap(c, from, to);
  // Stage 0 = layers 0..2, stage 1 = layers 3..5. Rank 1 gets stage 1 and rank 2 stage 0; the
  // sources alternate over the previous holders.
  std::vector<LayerTransfer> expected = {{0, 0, 2}, {1, 0, 2}, {2, 0, 2},
                                         {3, 2, 1}, {4, 2, 1}, {5, 2, 1}};
  EXPECT_EQ(plan, expected);
  EXPECT_EQ(RemapBytes(c, plan), [&] {
    int64_t n = 0;
    for (int l = 0; l < c.num_layers(); ++l) n += LayerParamCount(c, l);
    return 3 * 4 * n;
  }());
  EXPECT_TRUE(PlanRemap(c, from, from).empty());
}

TEST(RemapPlanTest, ReshapingSpreadsSourcesAcrossReplicas) {
  model::ModelConfig c = testing::SmallModel();
  c.vocab_size = 10;
  const analysis::plan::Layout from =
      *analysis::plan::Layout::Default(4, 4, 1);  // Every rank holds every layer.
  const analysis::plan::Layout to =
      *analysis::plan::Layout::Default(4, 1, 4);  // One pipeline of 4 stages.
  EXPECT_TRUE(PlanRemap(c, from, to).empty());    // Nothing is missing anywhere.
  const std::vector<LayerTransfer> back = PlanRemap(c, to, from);
  // Every rank lacks the layers of the 3 other stages; each comes from its only holder.
  EXPECT_EQ(back.size(), static_cast<size_t>(3 * c.num_layers()));
  for (const LayerTransfer& t : back) {
    EXPECT_EQ(t.src_rank, StageOfLayer(c, 4, t.layer));
    EXPECT_NE(t.dst_rank, t.src_rank);
  }
}

// A DP=2 x PP=2 job of `steps` iterations run plain and with `directive` (one JSON line of the
// directives file): both must end cleanly with the same parameters (the state moved exactly).
// Returns the run with the directive; `plain_run` gets the other.
testing::JobRun RunPlainAndWith(int steps, const std::string& directive, const std::string& name,
                                testing::JobRun* plain_run) {
  testing::JobSpec plain;
  plain.dp = 2;
  plain.pp = 2;
  plain.micro_batches = 4;
  plain.steps = steps;
  *plain_run = testing::RunJob(plain, name + "-plain");
  EXPECT_TRUE(plain_run->ok()) << common::testing::Describe(plain_run->exits);
  testing::JobSpec with = plain;
  with.directives = directive + "\n";
  testing::JobRun b = testing::RunJob(with, name);
  EXPECT_TRUE(b.ok()) << common::testing::Describe(b.exits);
  if (plain_run->ok() && b.ok()) {
    EXPECT_LT(testing::MaxRelativeDiff(testing::ReadParams(b.checkpoint_dir, plain.model),
                                       testing::ReadParams(plain_run->checkpoint_dir, plain.model)),
              1e-5);
  }
  return b;
}

TEST(RemapJobTest, TopologyChangeMidRunLeavesTrainingUnchanged) {
  testing::JobRun a;
  // The FALCON paper's swap (§5, Fig. 10 in arXiv 2410.12588): ranks 1 and 2 exchange positions at
  // iteration 3.
  const testing::JobRun b = RunPlainAndWith(
      6,
      R"({"directive": {"directive_id": 9, "effective_iteration": 3, "plan_version": 4,)"
      R"( "topology_change": {"assignments": [{"rank": 0, "dp_index": 0, "pp_index": 0},)"
      R"( {"rank": 1, "dp_index": 0, "pp_index": 1}, {"rank": 2, "dp_index": 1, "pp_index": 0},)"
      R"( {"rank": 3, "dp_index": 1, "pp_index": 1}]}}})",
      "remapped", &a);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<double> la = testing::LossCurve(testing::ReadJsonLines(a.json_log));
  const std::vector<double> lb = testing::LossCurve(testing::ReadJsonLines(b.json_log));
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5) << i;

  for (const auto& line : testing::ReadJsonLines(b.json_log)) {
    const int64_t it = line["iteration"];
    const int rank = line["rank"];
    const bool moved = it >= 3 && (rank == 1 || rank == 2);
    const int default_pp = rank / 2, default_dp = rank % 2;
    EXPECT_EQ(line["pp"], moved ? 1 - default_pp : default_pp) << line.dump();
    EXPECT_EQ(line["dp"], moved ? 1 - default_dp : default_dp) << line.dump();
    EXPECT_EQ(line["plan_version"], it >= 3 ? 4 : 0);
    if (it == 3) {
      EXPECT_GT(line["pause_s"].get<double>(), 0) << line.dump();
    }
  }
  int acks = 0;
  for (const auto& e : testing::ReadJsonLines(b.events)) {
    EXPECT_EQ(e["status"], "ACK_STATUS_APPLIED");
    EXPECT_EQ(e["applied_iteration"], 3);
    EXPECT_THAT(e["reason"].get<std::string>(), HasSubstr("pause_s="));
    EXPECT_THAT(e["reason"].get<std::string>(), HasSubstr("moved 6 layer copies"));
    ++acks;
  }
  EXPECT_EQ(acks, 4);
}

TEST(RemapJobTest, ReshapeFromTwoByTwoToOnePipelineOfFour) {
  testing::JobRun a;
  const testing::JobRun b = RunPlainAndWith(
      4,
      R"({"directive": {"directive_id": 3, "effective_iteration": 2, "plan_version": 1,)"
      R"( "topology_change": {"assignments": [{"rank": 0, "dp_index": 0, "pp_index": 0},)"
      R"( {"rank": 1, "dp_index": 0, "pp_index": 1}, {"rank": 2, "dp_index": 0, "pp_index": 2},)"
      R"( {"rank": 3, "dp_index": 0, "pp_index": 3}]}}})",
      "reshaped", &a);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& line : testing::ReadJsonLines(b.json_log)) {
    if (line["iteration"] >= 2) {
      EXPECT_EQ(line["micro_batches"], 4) << line.dump();
    }
  }
}

}  // namespace
}  // namespace falcon::trainer::directives
