// S3 and S2L: the remap plan (pure), state moved bit for bit between rank processes, and a
// topology change in the middle of a multi-process run.
#include "trainer/directives/remap.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "collective/comm_runtime.h"
#include "collective/gloo/gloo_communicator.h"
#include "common/clock.h"
#include "common/testing/multiprocess.h"
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

// Checks that `plan` takes every rank from its layers under `from` to those under `to`: one
// transfer per layer a rank gains, from a rank that held it.
void ExpectCompletePlan(const model::ModelConfig& c, const Placement& from, const Placement& to,
                        const std::vector<LayerTransfer>& plan) {
  size_t gained = 0;
  for (int r = 0; r < to.layout.world_size(); ++r) {
    const model::StageLayers before = LayersOfRank(c, from, r), after = LayersOfRank(c, to, r);
    for (int l = after.first; l < after.end; ++l) {
      if (before.Contains(l)) continue;
      ++gained;
      int found = 0;
      for (const LayerTransfer& t : plan) {
        if (t.dst_rank != r || t.layer != l) continue;
        ++found;
        EXPECT_TRUE(LayersOfRank(c, from, t.src_rank).Contains(l)) << r << " " << l;
      }
      EXPECT_EQ(found, 1) << "rank " << r << " layer " << l;
    }
  }
  EXPECT_EQ(plan.size(), gained);
}

TEST(RemapPlanTest, LayerSplitMovesBlocksBetweenAdjacentStagesOfOnePipeline) {
  model::ModelConfig c = testing::SmallModel();
  c.vocab_size = 10;
  c.num_blocks = 8;  // Layers 0 (embedding), 1..8 (blocks), 9 (head).
  const analysis::plan::Layout layout =
      *analysis::plan::Layout::Default(4, 2, 2);  // r0 (0,0) r1 (1,0) r2 (0,1) r3 (1,1)
  const Placement even{layout, {{4, 4}, {4, 4}}};
  EXPECT_EQ(PlanRemap(c, even, even), std::vector<LayerTransfer>{});
  EXPECT_EQ(PlanRemap(c, even, Placement{layout, {}}), std::vector<LayerTransfer>{});
  // DP group 0 gives block 3 (layer 4) to its stage 1, DP group 1 block 4 (layer 5) to its stage 0.
  const Placement split{layout, {{3, 5}, {5, 3}}};
  const std::vector<LayerTransfer> there = PlanRemap(c, even, split);
  EXPECT_EQ(there, (std::vector<LayerTransfer>{{4, 0, 2}, {5, 3, 1}}));
  EXPECT_EQ(RemapBytes(c, there), 2 * BlockStateBytes(c));
  ExpectCompletePlan(c, even, split, there);
  // The revert moves them back the same way.
  EXPECT_EQ(PlanRemap(c, split, even), (std::vector<LayerTransfer>{{4, 2, 0}, {5, 1, 3}}));
  // Every source is the same pipeline's adjacent stage, whatever the other pipeline holds.
  const Placement far{layout, {{1, 7}, {7, 1}}};
  const std::vector<LayerTransfer> moves = PlanRemap(c, split, far);
  EXPECT_EQ(moves.size(), 2u + 2u);
  for (const LayerTransfer& t : moves) {
    EXPECT_EQ(layout.at(t.src_rank).dp, layout.at(t.dst_rank).dp);
    EXPECT_EQ(std::abs(layout.at(t.src_rank).pp - layout.at(t.dst_rank).pp), 1);
  }
  ExpectCompletePlan(c, split, far, moves);
  EXPECT_EQ(RemapBytes(c, moves), 4 * BlockStateBytes(c));
}

TEST(RemapPlanTest, TopologyChangeUnderASplitKeepsEachDpIndexSplit) {
  model::ModelConfig c = testing::SmallModel();
  c.vocab_size = 10;
  c.num_blocks = 8;
  const analysis::plan::Layout from = *analysis::plan::Layout::Default(4, 2, 2);
  const analysis::plan::Layout to = *analysis::plan::Layout::Create(
      {{0, "", 0, 0, 0}, {1, "", 0, 1, 0}, {2, "", 1, 0, 0}, {3, "", 1, 1, 0}});
  const std::vector<common::StageBlocks> splits = {{3, 5}, {6, 2}};
  const Placement a{from, splits}, b{to, splits};
  const std::vector<LayerTransfer> plan = PlanRemap(c, a, b);
  ExpectCompletePlan(c, a, b, plan);
  // Rank 1 becomes DP 0's stage 1 (layers 4..9), rank 2 DP 1's stage 0 (layers 0..6); ranks 0 and
  // 3 keep their cells.
  EXPECT_EQ(LayersOfRank(c, b, 1).first, 4);
  EXPECT_EQ(LayersOfRank(c, b, 2).end, 7);
  for (const LayerTransfer& t : plan) EXPECT_TRUE(t.dst_rank == 1 || t.dst_rank == 2);
}

// A value of layer `layer`'s `kind` (0 params, 1 Adam m, 2 Adam v) at `i`: arbitrary mantissa bits,
// so a copy that is not exact shows.
float Pattern(int layer, int kind, int64_t i) {
  uint32_t h = static_cast<uint32_t>(layer) * 2654435761u ^ static_cast<uint32_t>(kind) * 40503u ^
               static_cast<uint32_t>(i) * 2246822519u;
  h ^= h >> 15;
  h *= 2246822519u;
  h = (h & 0x807FFFFFu) | 0x3F000000u;  // |x| in [0.5, 1).
  float f;
  std::memcpy(&f, &h, sizeof(f));
  return f;
}

// Every layer of `stage` holds exactly Pattern's bits; "" or what differs.
std::string PatternMismatch(const model::StageModel& stage) {
  for (int l = stage.layers().first; l < stage.layers().end; ++l) {
    const int64_t off = stage.LayerOffset(l);
    const float* arrays[3] = {stage.params(), stage.adam_m(), stage.adam_v()};
    for (int kind = 0; kind < 3; ++kind) {
      for (int64_t i = 0; i < stage.LayerSize(l); ++i) {
        const float want = Pattern(l, kind, i);
        if (std::memcmp(&arrays[kind][off + i], &want, sizeof(float)) != 0) {
          return absl::StrCat("layer ", l, " kind ", kind, " index ", i);
        }
      }
    }
  }
  return "";
}

TEST(RemapExecuteTest, LayerSplitMovesParametersAndMomentsBitForBit) {
  model::ModelConfig c = testing::SmallModel();
  c.vocab_size = 10;
  c.num_blocks = 8;
  const analysis::plan::Layout layout = *analysis::plan::Layout::Default(4, 2, 2);
  const Placement even{layout, {{4, 4}, {4, 4}}};
  const Placement split{layout, {{2, 6}, {5, 3}}};
  const std::vector<LayerTransfer> plan = PlanRemap(c, even, split);
  ASSERT_EQ(plan.size(), 3u);
  const std::string dir = common::testing::FreshDir("remap-bitwise");
  const std::vector<common::testing::RankExit> exits = common::testing::RunRanksStatus(
      4,
      [&](int rank) -> absl::Status {
        common::RealClock clock;
        collective::CommRuntimeOptions o;
        o.rank = rank;
        o.clock = &clock;
        auto runtime = std::make_shared<collective::CommRuntime>(o);
        collective::gloo::GlooWorldOptions w;
        w.rank = rank;
        w.world_size = 4;
        w.rendezvous_dir = dir;
        w.timeout = absl::Seconds(20);
        absl::StatusOr<std::unique_ptr<collective::Communicator>> world =
            collective::gloo::CreateGlooWorld(w, runtime);
        if (!world.ok()) return world.status();
        model::StageModel old(c, LayersOfRank(c, even, rank));
        for (int l = old.layers().first; l < old.layers().end; ++l) {
          for (int64_t i = 0; i < old.LayerSize(l); ++i) {
            old.params()[old.LayerOffset(l) + i] = Pattern(l, 0, i);
            old.adam_m()[old.LayerOffset(l) + i] = Pattern(l, 1, i);
            old.adam_v()[old.LayerOffset(l) + i] = Pattern(l, 2, i);
          }
        }
        absl::StatusOr<std::unique_ptr<model::StageModel>> now =
            ExecuteRemap(c, split, plan, old, **world);
        if (!now.ok()) return now.status();
        const model::StageLayers want = LayersOfRank(c, split, rank);
        if ((*now)->layers().first != want.first || (*now)->layers().end != want.end) {
          return absl::InternalError("wrong layers after the move");
        }
        if (std::string bad = PatternMismatch(**now); !bad.empty()) {
          return absl::InternalError(absl::StrCat("not bitwise equal: ", bad));
        }
        return absl::OkStatus();
      },
      absl::Seconds(60));
  for (const common::testing::RankExit& e : exits) EXPECT_TRUE(e.ok()) << e.rank;
  EXPECT_EQ(exits.size(), 4u);
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

TEST(RemapJobTest, TopologyChangeUnderALayerSplitKeepsEachDpIndexSplit) {
  testing::JobRun a;
  // A layer split at 2 (SmallModel: 4 blocks), then ranks 1 and 2 swap positions at 3.
  const testing::JobRun b = RunPlainAndWith(
      5,
      R"({"directive": {"directive_id": 1, "effective_iteration": 2, "plan_version": 1,)"
      R"( "layer_split": {"replicas": [{"stage_blocks": [1, 3]}, {"stage_blocks": [3, 1]}],)"
      R"( "micro_batches": [1, 3]}}})"
      "\n"
      R"({"directive": {"directive_id": 2, "effective_iteration": 3, "plan_version": 2,)"
      R"( "topology_change": {"assignments": [{"rank": 0, "dp_index": 0, "pp_index": 0},)"
      R"( {"rank": 1, "dp_index": 0, "pp_index": 1}, {"rank": 2, "dp_index": 1, "pp_index": 0},)"
      R"( {"rank": 3, "dp_index": 1, "pp_index": 1}]}}})",
      "split-remapped", &a);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<double> la = testing::LossCurve(testing::ReadJsonLines(a.json_log));
  const std::vector<double> lb = testing::LossCurve(testing::ReadJsonLines(b.json_log));
  ASSERT_EQ(lb.size(), la.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5) << i;
  for (const auto& line : testing::ReadJsonLines(b.json_log)) {
    const int64_t it = line["iteration"];
    const int dp = line["dp"];
    const std::vector<int> want = it < 2    ? std::vector<int>{2, 2}
                                  : dp == 0 ? std::vector<int>{1, 3}
                                            : std::vector<int>{3, 1};
    EXPECT_EQ(line["stage_blocks"].get<std::vector<int>>(), want) << line.dump();
    EXPECT_EQ(line["micro_batches"], it < 2 ? 2 : dp == 0 ? 1 : 3) << line.dump();
  }
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
