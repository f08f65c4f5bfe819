#include "analysis/plan/layer_split_planner.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

using ::testing::HasSubstr;

// Every split of `layers` into `stages` stages of at least `k` layers.
std::vector<StageSplit> AllSplits(int layers, int stages, int k) {
  std::vector<StageSplit> out;
  StageSplit cur = {0};
  std::function<void(int)> rec = [&](int s) {
    if (s == stages) {
      if (layers - cur.back() >= k) out.push_back(cur);
      return;
    }
    for (int a = cur.back() + k; a <= layers - (stages - s) * k; ++a) {
      cur.push_back(a);
      rec(s + 1);
      cur.pop_back();
    }
  };
  rec(1);
  return out;
}

// Every assignment of M/q blocks of q micro-batches to d replicas, each at least one block.
void ForEachCount(int d, int64_t blocks, int64_t q, std::vector<int64_t>* cur,
                  const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (static_cast<int>(cur->size()) == d - 1) {
    if (blocks >= 1) {
      cur->push_back(blocks * q);
      fn(*cur);
      cur->pop_back();
    }
    return;
  }
  const int64_t left = d - 1 - static_cast<int64_t>(cur->size());
  for (int64_t b = 1; b <= blocks - left; ++b) {
    cur->push_back(b * q);
    ForEachCount(d, blocks - b, q, cur, fn);
    cur->pop_back();
  }
}

// The exhaustive optimum: every split of every replica and every count assignment.
absl::Duration BruteForce(const LayerSplitProblem& p) {
  const std::vector<StageSplit> splits =
      AllSplits(static_cast<int>(p.layer_compute.size()), p.pp, p.min_layers_per_stage);
  absl::Duration best = absl::InfiniteDuration();
  std::vector<int64_t> cur;
  ForEachCount(p.dp, p.global_micro_batches / p.multiple, p.multiple, &cur,
               [&](const std::vector<int64_t>& m) {
                 // Replicas are independent given their counts: the best split of each.
                 absl::Duration worst = absl::ZeroDuration();
                 for (int d = 0; d < p.dp; ++d) {
                   absl::Duration mine = absl::InfiniteDuration();
                   for (const StageSplit& s : splits) {
                     std::vector<StageSplit> all(p.dp, s);
                     std::vector<int64_t> even(p.dp, p.multiple);
                     even[d] = m[d];
                     LayerSplitProblem one = p;
                     one.global_micro_batches = 0;
                     for (int64_t x : even) one.global_micro_batches += x;
                     absl::StatusOr<LayerSplitPlan> e = EvaluateLayerSplit(one, all, even);
                     if (!e.ok()) continue;  // Over the memory limit.
                     mine = std::min(mine, e->replicas[d].pipeline);
                   }
                   worst = std::max(worst, mine);
                 }
                 best = std::min(best, worst + p.allreduce);
               });
  return best;
}

TEST(LayerSplitPlannerTest, MatchesExhaustiveSearchOnSmallProblems) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 120; ++trial) {
    LayerSplitProblem p;
    p.dp = 2 + static_cast<int>(rng() % 2);
    p.pp = 2 + static_cast<int>(rng() % 2);
    p.min_layers_per_stage = 1 + static_cast<int>(rng() % 2);
    const int layers = p.pp * p.min_layers_per_stage + static_cast<int>(rng() % 5);
    for (int l = 0; l < layers; ++l) {
      p.layer_compute.push_back(absl::Microseconds(100 + rng() % 900));
      p.layer_memory_bytes.push_back(1 + rng() % 10);
    }
    if (rng() % 2 == 0) p.stage_memory_limit_bytes = 15 + rng() % 20;
    p.slowdowns.assign(p.dp * p.pp, 1.0);
    for (int i = 0; i < 2; ++i) p.slowdowns[rng() % p.slowdowns.size()] = 1.0 + (rng() % 20) / 10.0;
    if (rng() % 2 == 0) p.boundary_p2p.assign(p.pp - 1, absl::Microseconds(rng() % 200));
    p.allreduce = absl::Microseconds(rng() % 500);
    p.multiple = 1 + static_cast<int64_t>(rng() % 2);
    p.global_micro_batches = p.multiple * (p.dp + static_cast<int64_t>(rng() % 6));
    absl::StatusOr<LayerSplitPlan> plan = PlanLayerSplit(p);
    if (!plan.ok()) {
      // Only the memory limit can make it infeasible, and then no split fits at all.
      ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition) << plan.status();
      EXPECT_EQ(BruteForce(p), absl::InfiniteDuration()) << "trial " << trial;
      continue;
    }
    EXPECT_EQ(plan->iteration, BruteForce(p)) << "trial " << trial;
    // The plan is what it says: re-evaluated, the same time; counts sum to M.
    std::vector<StageSplit> splits;
    std::vector<int64_t> m;
    for (const ReplicaLayerPlan& r : plan->replicas) {
      splits.push_back(r.first_layer);
      m.push_back(r.micro_batches);
    }
    absl::StatusOr<LayerSplitPlan> again = EvaluateLayerSplit(p, splits, m);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->iteration, plan->iteration);
  }
}

// The compute scenario: DP 4 x PP 2, 16 equal blocks, x1.5 on (dp 2, stage 0).
LayerSplitProblem ComputeScenario(int64_t multiple, int64_t micro_batches) {
  LayerSplitProblem p;
  p.dp = 4;
  p.pp = 2;
  p.layer_compute.assign(16, absl::Milliseconds(1));
  p.slowdowns.assign(8, 1.0);
  p.slowdowns[2 * 2 + 0] = 1.5;
  p.multiple = multiple;
  p.global_micro_batches = micro_batches;
  return p;
}

TEST(LayerSplitPlannerTest, RepartitioningRecoversWhatMicroBatchesAloneCannot) {
  const LayerSplitProblem p = ComputeScenario(/*multiple=*/1, /*micro_batches=*/64);
  const StageSplit even = *EvenStageSplit(16, 2);
  const std::vector<StageSplit> evens(4, even);
  const std::vector<int64_t> sixteen(4, 16);
  absl::StatusOr<LayerSplitPlan> joint = PlanLayerSplit(p);
  absl::StatusOr<LayerSplitPlan> s2 = PlanMicroBatchesForSplits(p, evens);
  ASSERT_TRUE(joint.ok()) << joint.status();
  ASSERT_TRUE(s2.ok()) << s2.status();
  // The slow stage gives up layers: 6 of 16 (cycles 9 and 10 ms against 12 and 8).
  EXPECT_EQ(joint->replicas[2].first_layer, (StageSplit{0, 6}));
  EXPECT_EQ(joint->replicas[0].first_layer, even);
  const RecoverableCeiling with_split = *CeilingOf(p, evens, sixteen, *joint);
  const RecoverableCeiling s2_only = *CeilingOf(p, evens, sixteen, *s2);
  // Healthy (16 + 1) x 8 ms, slowed 8 + 12 + 15 x 12 ms.
  EXPECT_EQ(with_split.healthy, absl::Milliseconds(136));
  EXPECT_EQ(with_split.slowed, absl::Milliseconds(200));
  // Joint: slow replica 13 x 10 + 9 = 139, the others 17 each: 16 + 16 x 8 = 144 ms. 0.875.
  EXPECT_EQ(joint->iteration, absl::Milliseconds(144));
  EXPECT_NEAR(with_split.recoverable, 0.875, 1e-9);
  EXPECT_LT(s2_only.recoverable, 0.8);
  EXPECT_GT(with_split.recoverable, s2_only.recoverable + 0.1);
}

TEST(LayerSplitPlannerTest, MultiplesOfTheStageCountCapTheScenarioAtThreeQuarters) {
  // In blocks of 2 the three healthy replicas cannot share the slow one's surplus evenly.
  const LayerSplitProblem p = ComputeScenario(/*multiple=*/2, /*micro_batches=*/64);
  const std::vector<StageSplit> evens(4, *EvenStageSplit(16, 2));
  const LayerSplitPlan joint = *PlanLayerSplit(p);
  EXPECT_NEAR(CeilingOf(p, evens, std::vector<int64_t>(4, 16), joint)->recoverable, 0.75, 1e-9);
  // Twice the micro-batches give the blocks room again.
  const LayerSplitProblem more = ComputeScenario(2, 128);
  const LayerSplitPlan joint128 = *PlanLayerSplit(more);
  EXPECT_GE(CeilingOf(more, evens, std::vector<int64_t>(4, 32), joint128)->recoverable, 0.85);
}

TEST(LayerSplitPlannerTest, TheMemoryLimitBoundsWhatAStageTakes) {
  LayerSplitProblem p = ComputeScenario(1, 64);
  p.layer_memory_bytes.assign(16, 1 << 20);
  // A stage holds at most 9 layers: the slow replica's stage 1 cannot take 10.
  p.stage_memory_limit_bytes = 9 << 20;
  const LayerSplitPlan plan = *PlanLayerSplit(p);
  EXPECT_EQ(plan.replicas[2].first_layer, (StageSplit{0, 7}));
  for (const ReplicaLayerPlan& r : plan.replicas) {
    EXPECT_LE(r.first_layer[1], 9);
    EXPECT_GE(r.first_layer[1], 7);
  }
  p.stage_memory_limit_bytes = 7 << 20;  // 2 x 7 < 16: nothing fits.
  absl::StatusOr<LayerSplitPlan> none = PlanLayerSplit(p);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("stage_memory_limit_bytes"));
}

TEST(LayerSplitPlannerTest, AHealthyJobKeepsTheEvenPlan) {
  LayerSplitProblem p = ComputeScenario(2, 64);
  std::fill(p.slowdowns.begin(), p.slowdowns.end(), 1.0);
  const LayerSplitPlan plan = *PlanLayerSplit(p);
  for (const ReplicaLayerPlan& r : plan.replicas) {
    EXPECT_EQ(r.first_layer, (StageSplit{0, 8}));
    EXPECT_EQ(r.micro_batches, 16);
  }
  EXPECT_EQ(plan.iteration, absl::Milliseconds(136));
}

TEST(LayerSplitPlannerTest, RejectsBadProblemsNamingTheField) {
  const LayerSplitProblem good = ComputeScenario(2, 64);
  auto message = [](const LayerSplitProblem& p) {
    return std::string(ValidateLayerSplitProblem(p).message());
  };
  LayerSplitProblem p = good;
  p.slowdowns[3] = 0;
  EXPECT_THAT(message(p), HasSubstr("slowdowns[3]"));
  p = good;
  p.slowdowns.pop_back();
  EXPECT_THAT(message(p), HasSubstr("slowdowns"));
  p = good;
  p.layer_compute[4] = -absl::Milliseconds(1);
  EXPECT_THAT(message(p), HasSubstr("layer_compute[4]"));
  p = good;
  p.layer_compute.resize(1);
  EXPECT_THAT(message(p), HasSubstr("layer_compute"));
  p = good;
  p.global_micro_batches = 63;
  EXPECT_THAT(message(p), HasSubstr("global_micro_batches"));
  p = good;
  p.global_micro_batches = 6;  // Fewer than dp x multiple.
  EXPECT_THAT(message(p), HasSubstr("global_micro_batches"));
  p = good;
  p.boundary_p2p.assign(3, absl::Milliseconds(1));
  EXPECT_THAT(message(p), HasSubstr("boundary_p2p"));
  p = good;
  p.stage_memory_limit_bytes = 10;
  EXPECT_THAT(message(p), HasSubstr("layer_memory_bytes"));
  p = good;
  p.multiple = 0;
  EXPECT_THAT(message(p), HasSubstr("multiple"));
  p = good;
  p.layer_compute.assign(16, absl::Seconds(900));
  p.slowdowns.assign(8, 900);
  p.global_micro_batches = 4'000'000;
  EXPECT_THAT(message(p), HasSubstr("overflows"));
  EXPECT_THAT(
      std::string(EvaluateLayerSplit(good, {{0, 8}, {0, 8}, {0, 8}, {0, 16}}, {16, 16, 16, 16})
                      .status()
                      .message()),
      HasSubstr("splits[3]"));
  EXPECT_THAT(
      std::string(EvaluateLayerSplit(good, std::vector<StageSplit>(4, {0, 8}), {16, 16, 16, 15})
                      .status()
                      .message()),
      HasSubstr("micro_batches[3]"));
  EXPECT_THAT(
      std::string(EvaluateLayerSplit(good, {{0, 8}, {0, 8}, {0, 8}, {0, -3}}, {16, 16, 16, 16})
                      .status()
                      .message()),
      HasSubstr("splits[3]"));
  EXPECT_THAT(std::string(EvaluateLayerSplit(good, std::vector<StageSplit>(4, {0, 8}),
                                             {int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62,
                                              (int64_t{1} << 62) + 4})
                              .status()
                              .message()),
              HasSubstr("micro_batches[0]"));
  p = good;
  p.layer_compute.assign(2, absl::Nanoseconds(1));
  p.pp = 2;
  p.slowdowns.assign(8, 1.0);
  p.boundary_p2p.assign(1, absl::Seconds(1000));
  p.global_micro_batches = 4'000'000;
  EXPECT_THAT(message(p), HasSubstr("boundary_p2p"));
  p = good;
  p.pp = 256;
  p.slowdowns.assign(4 * 256, 1.0);
  p.boundary_p2p.clear();
  p.global_micro_batches = 64;
  p.layer_compute.assign(4096, absl::Milliseconds(1));
  EXPECT_THAT(message(p), HasSubstr("too large to plan"));
  EXPECT_FALSE(EvenStageSplit(1, 2).ok());
  EXPECT_EQ(*EvenStageSplit(10, 3), (StageSplit{0, 3, 6}));
}

}  // namespace
}  // namespace falcon::analysis::plan
