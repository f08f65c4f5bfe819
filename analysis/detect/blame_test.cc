#include "analysis/detect/blame.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::Duration Ms(double ms) { return absl::Milliseconds(ms); }

// A DP=4 x PP=2 job; rank = 4 * stage + dp. Healthy: 100 ms compute, DP all-reduce 10 ms per
// stage, PP send/recv 5 ms between the stages of each DP replica.
struct Job {
  std::vector<double> compute_ms = std::vector<double>(8, 100.0);
  std::vector<double> dp_busy_ms = std::vector<double>(8, 10.0);
  std::vector<double> pp_busy_ms = std::vector<double>(8, 5.0);

  BlameInput Build() const {
    BlameInput in;
    in.step = 7;
    for (int r = 0; r < 8; ++r) in.ranks.push_back({r, r / 4, Ms(compute_ms[r])});
    for (int stage = 0; stage < 2; ++stage) {
      CommTiming dp{static_cast<uint64_t>(100 + stage), "dp-allreduce", 1 << 20, {}};
      for (int d = 0; d < 4; ++d)
        dp.members.push_back({4 * stage + d, Ms(dp_busy_ms[4 * stage + d])});
      in.comms.push_back(dp);
    }
    for (int d = 0; d < 4; ++d) {
      in.comms.push_back({static_cast<uint64_t>(200 + d),
                          "pp-p2p",
                          1 << 16,
                          {{d, Ms(pp_busy_ms[d])}, {4 + d, Ms(pp_busy_ms[4 + d])}}});
    }
    return in;
  }
};

TEST(BlameStepTest, HealthyJobBlamesNobody) {
  const BlameResult r = *BlameStep(Job().Build(), BlameOptions());
  EXPECT_THAT(r.blamed, IsEmpty());
  EXPECT_THAT(r.suspicious, IsEmpty());
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.iteration_time, Ms(115));  // Median of compute + busy.
}

TEST(BlameStepTest, SlowComputeIsBlamedNotTheRanksThatWait) {
  Job job;
  job.compute_ms[1] = 160;  // dp 1, stage 0.
  // Its DP peers wait 60 ms in the all-reduce, its pipeline successor 60 ms in recv.
  for (int r : {0, 2, 3}) job.dp_busy_ms[r] = 70;
  job.pp_busy_ms[5] = 65;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 1);
  EXPECT_EQ(r.blamed[0].cause, BlameCause::kCompute);
  EXPECT_DOUBLE_EQ(r.blamed[0].ratio, 1.6);
  EXPECT_EQ(r.blamed[0].excess, Ms(60));
  EXPECT_THAT(r.suspicious, IsEmpty());
}

TEST(BlameStepTest, RankWithSlowLinkIsBlamedForCommunication) {
  Job job;
  // Rank 6's NIC is slow: its DP all-reduce (stage 1) and its pipeline link both take 3x.
  for (int r : {4, 5, 6, 7}) job.dp_busy_ms[r] = 30;
  job.pp_busy_ms[2] = 15;
  job.pp_busy_ms[6] = 15;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 6);
  EXPECT_EQ(r.blamed[0].cause, BlameCause::kCommunication);
  EXPECT_DOUBLE_EQ(r.blamed[0].ratio, 3.0);
  ASSERT_EQ(r.suspicious.size(), 2u);
  EXPECT_EQ(r.suspicious[0].comm_id, 101u);
  EXPECT_EQ(r.suspicious[1].comm_id, 202u);
}

// A pipeline: the slow rank 1 delays its activations, so its successor 5 waits in recv, and the
// gradients 5 sends back come late, so rank 1 waits in its recv as well; neither member's time in
// the communicator is transfer. The compute excess (60 ms) outweighs the communicator's (40 ms).
TEST(BlameStepTest, PipelineWaitOnASlowComputeRankIsExplainedByIt) {
  Job job;
  job.compute_ms[1] = 160;
  job.pp_busy_ms[1] = 45;
  job.pp_busy_ms[5] = 65;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 1);
  EXPECT_EQ(r.blamed[0].cause, BlameCause::kCompute);
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_EQ(r.suspicious[0].comm_id, 201u);
  EXPECT_EQ(r.suspicious[0].explained_by_rank, 1);
}

// The same communicator slower than its member's compute excess explains: a link fault as well
// (or instead), so it stays unexplained and its members are blamed for communication.
TEST(BlameStepTest, CommunicatorSlowerThanItsComputeExcessStaysUnexplained) {
  Job job;
  job.compute_ms[1] = 130;  // 30 ms over the stage's median.
  job.pp_busy_ms[1] = 60;   // 55 ms over the other pipeline links.
  job.pp_busy_ms[5] = 60;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_EQ(r.suspicious[0].explained_by_rank, -1);
  // Rank 1 for its compute and its link, rank 5 for the link.
  ASSERT_EQ(r.blamed.size(), 3u);
  EXPECT_EQ(r.blamed[0].rank, 1);
  EXPECT_EQ(r.blamed[0].cause, BlameCause::kCompute);
  EXPECT_EQ(r.blamed[1].rank, 1);
  EXPECT_EQ(r.blamed[1].cause, BlameCause::kCommunication);
  EXPECT_EQ(r.blamed[2].rank, 5);
  EXPECT_EQ(r.blamed[2].comm_id, 201u);
}

TEST(BlameStepTest, LoneSlowGroupBlamesItsMembers) {
  Job job;
  job.pp_busy_ms[3] = 20;
  job.pp_busy_ms[7] = 20;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  ASSERT_EQ(r.blamed.size(), 2u);
  EXPECT_EQ(r.blamed[0].rank, 3);
  EXPECT_EQ(r.blamed[1].rank, 7);
  EXPECT_EQ(r.blamed[1].comm_id, 203u);
}

TEST(BlameStepTest, SmallExcessIsSuspiciousButNotBlamed) {
  Job job;
  job.pp_busy_ms[0] = 6.5;  // 30% slower, but 1.5 ms of a 115 ms iteration.
  job.pp_busy_ms[4] = 6.5;
  const BlameResult r = *BlameStep(job.Build(), BlameOptions());
  EXPECT_THAT(r.blamed, IsEmpty());
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_NEAR(r.suspicious[0].ratio, 1.3, 1e-9);
  EXPECT_FALSE(r.suspicious[0].material);
  BlameOptions o;
  o.min_excess_fraction = 0;
  EXPECT_EQ(BlameStep(job.Build(), o)->blamed.size(), 2u);
  EXPECT_TRUE(BlameStep(job.Build(), o)->suspicious[0].material);
}

TEST(BlameStepTest, MeasuredTransferTimeIsPreferredToBusyTime) {
  Job job;
  for (int r : {4, 5, 6, 7}) job.dp_busy_ms[r] = 40;  // Busy, but...
  BlameInput in = job.Build();
  for (CommMember& m : in.comms[1].members) m.transfer = Ms(10);  // ...only waiting.
  EXPECT_THAT(BlameStep(in, BlameOptions())->blamed, IsEmpty());
  in.iteration_time = Ms(200);
  EXPECT_EQ(BlameStep(in, BlameOptions())->iteration_time, Ms(200));
}

TEST(BlameStepTest, RejectsBadInputNamingIt) {
  BlameInput in = Job().Build();
  in.ranks[2].compute = Ms(-1);
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("rank 2"));
  in = Job().Build();
  in.ranks.push_back({3, 0, Ms(1)});
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("rank 3 appears twice"));
  in = Job().Build();
  in.comms[0].members.clear();
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("100 has no members"));
  in = Job().Build();
  in.comms[2].members[1].rank = 0;
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("rank 0 twice"));
  in = Job().Build();
  in.comms[3].comm_id = 200;
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("200 appears twice"));
  in = Job().Build();
  in.comms[3].members[0].busy = Ms(-2);
  EXPECT_THAT(BlameStep(in, BlameOptions()).status().message(), HasSubstr("negative busy"));
  BlameOptions o;
  o.slow_ratio = 0;
  EXPECT_THAT(BlameStep(Job().Build(), o).status().message(), HasSubstr("slow_ratio"));
}

TEST(CauseNameTest, Names) {
  EXPECT_THAT((std::vector<absl::string_view>{BlameCauseName(BlameCause::kCompute),
                                              BlameCauseName(BlameCause::kCommunication)}),
              ElementsAre("compute", "communication"));
}

}  // namespace
}  // namespace falcon::analysis::detect
