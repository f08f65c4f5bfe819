#include "controller/detection/imbalance_tracker.h"

#include <functional>
#include <optional>
#include <string>

#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::detection {
namespace {

// A DP=4 x PP=2 job (rank = stage * 4 + replica) on one node.
class ImbalanceTrackerTest : public ::testing::Test {
 protected:
  ImbalanceTrackerTest() : tracker_(ImbalanceTrackerOptions{}) {
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 8;
    store::StoreTxn txn;
    EXPECT_FALSE(
        registry_.Register("a", "node-0", testing::NodeRegistration(spec_, 0), "r", &txn, &job_)
            .has_value());
  }

  // Iterations [from, to): rank r computes compute_ms(i, r) milliseconds. Returns how many
  // analyses ran.
  int Run(int64_t from, int64_t to, const std::function<double(int64_t, uint32_t)>& compute_ms) {
    int analyses = 0;
    for (int64_t i = from; i < to; ++i) {
      for (uint32_t r = 0; r < 8; ++r) {
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, 200'000'000);
        s.set_compute_ns(static_cast<int64_t>(compute_ms(i, r) * 1e6));
        analyses += tracker_.Add(*job_, s) ? 1 : 0;
      }
    }
    return analyses;
  }

  testing::LayoutSpec spec_;
  registry::JobRegistry registry_;
  registry::JobEntry* job_ = nullptr;
  ImbalanceTracker tracker_;
};

double Wobble(int64_t i, uint32_t r) {
  return static_cast<double>((i * 7919 + r * 104729) % 201 - 100) / 100.0;  // [-1, 1]
}

TEST_F(ImbalanceTrackerTest, BalancedJobIsAnalysedEveryFewIterationsAndBlamesNoOne) {
  EXPECT_EQ(Run(0, 8, [](int64_t i, uint32_t r) { return 100 + Wobble(i, r); }), 0);
  EXPECT_EQ(tracker_.Report("job"), nullptr);  // Fewer iterations than the analysis needs.
  // At the 16th, 32nd, 48th and 64th iteration.
  EXPECT_EQ(Run(8, 64, [](int64_t i, uint32_t r) { return 100 + Wobble(i, r); }), 4);
  const analysis::detect::ImbalanceReport* r = tracker_.Report("job");
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->stage_imbalance.has_value());
  EXPECT_FALSE(r->jitter.has_value());
  EXPECT_FALSE(tracker_.IsBlameless("job", 5, 0, nullptr));
  const falcon::v1::WorkloadImbalance p =
      ImbalanceTracker::ToProto(*r, tracker_.options().analysis);
  EXPECT_EQ(p.iterations(), r->steps);
  EXPECT_FALSE(p.stage_imbalanced());
  ASSERT_EQ(p.findings_size(), 1);
  EXPECT_EQ(p.findings(0), "no workload imbalance and no persistent straggler");
}

TEST_F(ImbalanceTrackerTest, JitterMakesAnOccasionallySlowRankBlamelessButNotAPersistentOne) {
  // Each iteration one replica of each stage gets the long sequences (x1.5).
  auto jitter = [](int64_t i, uint32_t r) { return (r % 4 == i % 4 ? 150 : 100) + Wobble(i, r); };
  Run(0, 64, jitter);
  const analysis::detect::ImbalanceReport* rep = tracker_.Report("job");
  ASSERT_NE(rep, nullptr);
  ASSERT_TRUE(rep->jitter.has_value());
  EXPECT_TRUE(rep->stragglers.empty());
  std::string why;
  EXPECT_TRUE(tracker_.IsBlameless("job", 5, 40, &why));
  EXPECT_NE(why.find("data-dependent jitter"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 5 was slow in"), std::string::npos) << why;
  // From iteration 64 on rank 5 is also x1.6 slower every iteration: a fail-slow since 64.
  Run(64, 96, [&](int64_t i, uint32_t r) { return jitter(i, r) * (r == 5 ? 1.6 : 1.0); });
  EXPECT_FALSE(tracker_.IsBlameless("job", 5, 64, &why)) << why;
  EXPECT_TRUE(tracker_.IsBlameless("job", 6, 64, nullptr));
}

// An event whose onset was noise a few iterations before the fault: the fault's iterations are
// a minority of those since the onset, but the rank is slow in each of its newest ones.
TEST_F(ImbalanceTrackerTest, AFaultThatBeganAfterTheOnsetIsNotJitterOnceItIsSlowRunning) {
  auto jitter = [](int64_t i, uint32_t r) { return (r % 4 == i % 4 ? 150 : 100) + Wobble(i, r); };
  Run(0, 64, jitter);
  auto faulted = [&](int64_t i, uint32_t r) { return jitter(i, r) * (r == 5 ? 1.6 : 1.0); };
  // Slow at 61 (jitter), then 64, 65, 66: three running, 11 of 35 since 32.
  Run(64, 67, faulted);
  std::string why;
  EXPECT_TRUE(tracker_.IsBlameless("job", 5, 32, &why));
  EXPECT_NE(why.find("rank 5 was slow in 11 of 35 iterations since 32"), std::string::npos) << why;
  Run(67, 68, faulted);  // The fourth running: 12 of 36 since 32, still a minority.
  EXPECT_FALSE(tracker_.IsBlameless("job", 5, 32, &why));
  EXPECT_TRUE(tracker_.IsBlameless("job", 6, 32, nullptr));
}

TEST_F(ImbalanceTrackerTest, AStageImbalanceIsReportedAndItsRanksAreBlameless) {
  Run(0, 64, [](int64_t i, uint32_t r) { return (r >= 4 ? 160 : 100) + Wobble(i, r); });
  const analysis::detect::ImbalanceReport* rep = tracker_.Report("job");
  ASSERT_NE(rep, nullptr);
  ASSERT_TRUE(rep->stage_imbalance.has_value());
  EXPECT_EQ(rep->stage_imbalance->stage, 1);
  EXPECT_NEAR(rep->stage_imbalance->ratio, 1.6, 0.05);
  EXPECT_TRUE(tracker_.IsBlameless("job", 5, 0, nullptr));   // Stage 1.
  EXPECT_FALSE(tracker_.IsBlameless("job", 1, 0, nullptr));  // Stage 0 is not imbalanced.
  const falcon::v1::WorkloadImbalance p =
      ImbalanceTracker::ToProto(*rep, tracker_.options().analysis);
  EXPECT_TRUE(p.stage_imbalanced());
  EXPECT_EQ(p.stage(), 1u);
  tracker_.RemoveJob("job");
  EXPECT_EQ(tracker_.Report("job"), nullptr);
}

TEST_F(ImbalanceTrackerTest, ComputeIsPerMicroBatchUnderThePlanInForce) {
  // An S2 plan gives DP group 1 fewer micro-batches: its ranks compute less, per micro-batch
  // the same. No imbalance, no straggler.
  std::vector<uint32_t> plan = {10, 6, 8, 8};
  registry::JobEntry planned = *job_;
  planned.set_plan(1, plan);
  for (int64_t i = 0; i < 64; ++i) {
    for (uint32_t r = 0; r < 8; ++r) {
      falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, 200'000'000);
      s.set_compute_ns(static_cast<int64_t>((10 + Wobble(i, r) / 10) * plan[r % 4] * 1e6));
      tracker_.Add(planned, s);
    }
  }
  const analysis::detect::ImbalanceReport* rep = tracker_.Report("job");
  ASSERT_NE(rep, nullptr);
  EXPECT_TRUE(rep->stragglers.empty());
  EXPECT_FALSE(rep->jitter.has_value());
}

TEST_F(ImbalanceTrackerTest, ANewLayoutStartsTheWindowOver) {
  auto heavy_4_to_7 = [](int64_t i, uint32_t r) { return (r >= 4 ? 160 : 100) + Wobble(i, r); };
  Run(0, 64, heavy_4_to_7);
  ASSERT_EQ(tracker_.Report("job")->stage_imbalance->stage, 1);
  // S3 swaps the stages: ranks 4-7 now hold stage 0.
  falcon::controller::v1::JobRecord record = job_->record();  // With its parts inside.
  for (const auto& [id, part] : job_->parts()) *record.add_agents() = part;
  for (auto& agent : *record.mutable_agents()) {
    for (auto& r : *agent.mutable_registration()->mutable_ranks()) {
      r.set_pp_index(r.rank() >= 4 ? 0 : 1);
    }
  }
  registry::JobEntry swapped(record);
  int analyses = 0;
  for (int64_t i = 64; i < 80; ++i) {
    for (uint32_t r = 0; r < 8; ++r) {
      falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, 200'000'000);
      s.set_compute_ns(static_cast<int64_t>(heavy_4_to_7(i, r) * 1e6));
      analyses += tracker_.Add(swapped, s) ? 1 : 0;
    }
  }
  EXPECT_EQ(analyses, 1);  // At the 16th iteration of the new layout, not before.
  const analysis::detect::ImbalanceReport* rep = tracker_.Report("job");
  ASSERT_NE(rep, nullptr);
  EXPECT_EQ(rep->steps, 15);
  ASSERT_TRUE(rep->stage_imbalance.has_value());
  EXPECT_EQ(rep->stage_imbalance->stage, 0);
}

TEST(ImbalanceTrackerOptionsTest, RangesAreChecked) {
  ImbalanceTrackerOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.window = 5;
  EXPECT_NE(o.Validate().message().find("window"), std::string::npos);
  o = ImbalanceTrackerOptions();
  o.every = 0;
  EXPECT_NE(o.Validate().message().find("every"), std::string::npos);
}

}  // namespace
}  // namespace falcon::controller::detection
