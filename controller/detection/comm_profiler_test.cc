#include "controller/detection/comm_profiler.h"

#include <optional>

#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::detection {
namespace {

class CommProfilerTest : public ::testing::Test {
 protected:
  CommProfilerTest() {
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 8;
    store::StoreTxn txn;
    EXPECT_FALSE(
        registry_.Register("a", "node-0", testing::NodeRegistration(spec_, 0), "r", &txn, &job_)
            .has_value());
  }
  // One iteration where `slow_rank` computes `extra` longer and its DP peers wait for it; with
  // `pipeline_wait`, both members of its pipeline communicator wait `pipeline_wait` in it too.
  void AddIteration(CommProfiler& p, int64_t it, int slow_rank, int64_t extra,
                    int64_t pipeline_wait = 0) {
    for (uint32_t r = 0; r < 8; ++r) {
      falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, it, 100'000'000 + extra);
      if (static_cast<int>(r) == slow_rank) {
        s.set_compute_ns(s.compute_ns() + extra);
      } else {
        for (auto& c : *s.mutable_comms()) {
          if (c.comm_id() == 1000 + r / spec_.dp && slow_rank >= 0 &&
              r / spec_.dp == static_cast<uint32_t>(slow_rank) / spec_.dp) {
            c.set_wait_ns(c.wait_ns() + extra);
            c.set_busy_ns(c.busy_ns() + extra);
          }
        }
      }
      if (slow_rank >= 0 && r % spec_.dp == static_cast<uint32_t>(slow_rank) % spec_.dp) {
        for (auto& c : *s.mutable_comms()) {
          if (c.comm_id() != 2000 + r % spec_.dp) continue;
          // Timed as transfer: the shim cannot tell a receive's wait from its data moving.
          c.set_transfer_ns(c.transfer_ns() + pipeline_wait);
          c.set_busy_ns(c.busy_ns() + pipeline_wait);
        }
      }
      p.AddSummary(s, *job_);
    }
    p.CompleteIteration(it, 100'000'000 + extra, 8, analysis::detect::BlameOptions());
  }

  testing::LayoutSpec spec_;
  registry::JobRegistry registry_;
  registry::JobEntry* job_ = nullptr;
};

TEST_F(CommProfilerTest, BlamesTheRankThatComputesLongerNotTheOnesWaiting) {
  CommProfiler p;
  AddIteration(p, 0, 2, 40'000'000);  // Not active yet: ignored.
  EXPECT_EQ(p.Result().iterations, 0);
  p.Start();
  for (int64_t it = 1; it <= 4; ++it) AddIteration(p, it, 2, 40'000'000);
  ProfileResult r = p.Result();
  EXPECT_EQ(r.iterations, 4);
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 2u);
  EXPECT_EQ(r.blamed[0].cause, analysis::detect::BlameCause::kCompute);
  EXPECT_GT(r.blamed[0].ratio, 1.1);
  EXPECT_DOUBLE_EQ(r.blamed[0].fraction, 1.0);
  EXPECT_EQ(p.pending_iterations(), 0u);
}

// Rank 2's pipeline peer waits for its activations and rank 2 for the late gradients: their
// communicator reads slower than the other replicas', by less than rank 2's extra compute, so it
// is rank 2's compute, not a suspicious communicator (blame.h). Waits beyond the compute excess
// still flag it.
TEST_F(CommProfilerTest, PipelineWaitExplainedByTheSlowRankIsNotSuspicious) {
  CommProfiler p;
  p.Start();
  for (int64_t it = 0; it < 3; ++it) AddIteration(p, it, 2, 40'000'000, 30'000'000);
  ProfileResult r = p.Result();
  EXPECT_TRUE(r.suspicious.empty());
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 2u);
  EXPECT_EQ(r.blamed[0].cause, analysis::detect::BlameCause::kCompute);

  p.Start();
  for (int64_t it = 3; it < 6; ++it) AddIteration(p, it, 2, 40'000'000, 60'000'000);
  r = p.Result();
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_EQ(r.suspicious[0].comm_id, 2002u);
}

// Profiling began while iteration 0 was being reported: rank 2 (the slow one) and its node's
// ranks had sent theirs already. Judged without them, rank 2's pipeline peer (rank 6), waiting on
// it, would read as a slow transfer on their link and be blamed; the iteration is not judged.
TEST_F(CommProfilerTest, AnIterationSomeRankDidNotReportIsNotJudged) {
  CommProfiler p;
  p.Start();
  for (uint32_t r = 4; r < 8; ++r) {
    falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, 0, 140'000'000);
    for (auto& c : *s.mutable_comms()) {
      if (c.comm_id() != 2000 + r % spec_.dp || r != 6) continue;
      c.set_transfer_ns(c.transfer_ns() + 40'000'000);
      c.set_busy_ns(c.busy_ns() + 40'000'000);
    }
    p.AddSummary(s, *job_);
  }
  p.CompleteIteration(0, 140'000'000, 8, analysis::detect::BlameOptions());
  EXPECT_EQ(p.judged(), 0);
  EXPECT_EQ(p.incomplete(), 1);
  EXPECT_EQ(p.pending_iterations(), 0u);
  EXPECT_EQ(p.Result().iterations, 0);
  EXPECT_TRUE(p.Result().blamed.empty());

  for (int64_t it = 1; it <= 3; ++it) AddIteration(p, it, 2, 40'000'000, 30'000'000);
  ProfileResult r = p.Result();
  EXPECT_EQ(r.iterations, 3);
  EXPECT_TRUE(r.suspicious.empty());
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 2u);
  EXPECT_EQ(r.blamed[0].cause, analysis::detect::BlameCause::kCompute);
}

// Profiling began when the ranks were spread over iterations 0-4 (thousands of agents drift
// apart): it starts at 5, the iteration after the newest reported. Data of earlier iterations is
// neither kept nor judged, and counts as no incomplete iteration.
TEST_F(CommProfilerTest, IterationsBeforeTheFirstAreNeitherKeptNorJudged) {
  CommProfiler p;
  p.Start(5);
  EXPECT_EQ(p.first_iteration(), 5);
  for (int64_t it = 2; it <= 7; ++it) AddIteration(p, it, 2, 40'000'000);
  EXPECT_EQ(p.incomplete(), 0);
  EXPECT_EQ(p.judged(), 3);
  EXPECT_EQ(p.pending_iterations(), 0u);
  ProfileResult r = p.Result();
  EXPECT_EQ(r.iterations, 3);
  ASSERT_EQ(r.blamed.size(), 1u);
  EXPECT_EQ(r.blamed[0].rank, 2u);
}

// Replica 1's pipeline pair (comm 2001) moves its data `extra_ns` longer than the others.
TEST_F(CommProfilerTest, ACommunicatorExcessTooSmallToSlowTheJobIsNotSuspicious) {
  for (int64_t extra_ns : {2'000'000, 8'000'000}) {
    CommProfiler p;
    p.Start();
    for (int64_t it = 0; it < 3; ++it) {
      for (uint32_t r = 0; r < 8; ++r) {
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, it, 100'000'000);
        for (auto& c : *s.mutable_comms()) {
          if (c.comm_id() != 2001) continue;
          c.set_transfer_ns(c.transfer_ns() + extra_ns);
          c.set_busy_ns(c.busy_ns() + extra_ns);
        }
        p.AddSummary(s, *job_);
      }
      p.CompleteIteration(it, 100'000'000, 8, analysis::detect::BlameOptions());
    }
    // 12 ms against 10 ms is over the 10% ratio, but 2 ms of a 100 ms iteration is under the 5%
    // a culprit must explain; 18 ms is both.
    EXPECT_EQ(p.Result().suspicious.size(), extra_ns == 2'000'000 ? 0u : 1u) << extra_ns;
  }
}

// Peer transfers from NCCL's profiler plugin rank the DP rings' links; they are not op time.
TEST_F(CommProfilerTest, PeerTransfersRankLinksWithoutTouchingTransferTimes) {
  CommProfiler p;
  google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> early;
  p.AddOps(0, early, *job_);  // Not active: nothing kept.
  p.Start();
  for (int64_t it = 0; it < 3; ++it) {
    for (uint32_t r = 0; r < 8; ++r) {
      const uint32_t stage = r / 4;
      const uint32_t next = stage * 4 + (r + 1) % 4;
      const uint32_t prev = stage * 4 + (r + 3) % 4;
      google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> ops;
      falcon::v1::OpRecord* send = ops.Add();
      send->set_comm_id(1000 + stage);
      send->set_op_kind(falcon::v1::OP_KIND_PEER_SEND);
      send->set_peer(static_cast<int32_t>(next));
      send->set_iteration(it);
      send->set_bytes(32 << 20);
      send->set_device_duration_ns(r == 5 ? 40'000'000 : 10'000'000);  // 5 -> 6 is 4x slower.
      falcon::v1::OpRecord* recv = ops.Add();
      *recv = *send;
      recv->set_op_kind(falcon::v1::OP_KIND_PEER_RECV);
      recv->set_peer(static_cast<int32_t>(prev));
      recv->set_device_duration_ns(r == 6 ? 40'000'000 : 10'000'000);
      falcon::v1::OpRecord* unknown = ops.Add();
      *unknown = *send;
      unknown->set_comm_id(999999);  // Not a comm of the job: ignored.
      p.AddOps(r, ops, *job_);
    }
    AddIteration(p, it, -1, 0);
  }
  EXPECT_TRUE(p.has_peer_transfers());
  EXPECT_TRUE(p.Result().suspicious.empty());  // Summaries' transfer times are untouched.
  analysis::detect::PeerLinkRanking ranking = p.PeerLinks({});
  ASSERT_EQ(ranking.links.size(), 8u);
  EXPECT_EQ(ranking.links[0].key.src, 5u);
  EXPECT_EQ(ranking.links[0].key.dst, 6u);
  EXPECT_NEAR(ranking.links[0].ratio, 4.0, 1e-9);
  EXPECT_EQ(ranking.Slow().size(), 1u);
  p.Start();
  EXPECT_FALSE(p.has_peer_transfers());
}

TEST_F(CommProfilerTest, SlowTransferFromDeviceTimedOpsFlagsTheCommunicator) {
  CommProfiler p;
  p.Start();
  for (int64_t it = 0; it < 3; ++it) {
    // Every member of stage 1's DP communicator (comm 1001) moves data 3x longer than stage 0's.
    for (uint32_t r = 4; r < 8; ++r) {
      google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> ops;
      falcon::v1::OpRecord* op = ops.Add();
      op->set_comm_id(1001);
      op->set_iteration(it);
      op->set_device_duration_ns(30'000'000);
      p.AddOps(r, ops, *job_);
    }
    AddIteration(p, it, -1, 0);
  }
  ProfileResult r = p.Result();
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_EQ(r.suspicious[0].comm_id, 1001u);
  EXPECT_GT(r.suspicious[0].ratio, 1.1);
  p.Stop();
  EXPECT_FALSE(p.active());
}

// A rank's ops of one iteration may come in two batches (the agent splits a node's ops at its
// per-batch limit): their device times add up, the second batch does not replace the first.
TEST_F(CommProfilerTest, DeviceTimeOfOpsInSeveralBatchesAddsUp) {
  CommProfiler p;
  p.Start();
  for (int64_t it = 0; it < 3; ++it) {
    for (uint32_t r = 4; r < 8; ++r) {
      for (int64_t part_ns : {25'000'000, 5'000'000}) {  // 30 ms in all: 3x stage 0's.
        google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> ops;
        falcon::v1::OpRecord* op = ops.Add();
        op->set_comm_id(1001);
        op->set_iteration(it);
        op->set_device_duration_ns(part_ns);
        p.AddOps(r, ops, *job_);
      }
    }
    AddIteration(p, it, -1, 0);
  }
  ProfileResult r = p.Result();
  ASSERT_EQ(r.suspicious.size(), 1u);
  EXPECT_EQ(r.suspicious[0].comm_id, 1001u);
}

TEST_F(CommProfilerTest, HealthyIterationsFlagNothingAndPendingIsBounded) {
  CommProfiler p(/*max_pending_iterations=*/4);
  p.Start();
  for (int64_t it = 0; it < 5; ++it) AddIteration(p, it, -1, 0);
  EXPECT_TRUE(p.Result().suspicious.empty());
  EXPECT_TRUE(p.Result().blamed.empty());
  for (int64_t it = 10; it < 20; ++it) {
    p.AddSummary(testing::MakeSummary(spec_, 0, it, 100'000'000), *job_);
  }
  EXPECT_LE(p.pending_iterations(), 4u);
}

}  // namespace
}  // namespace falcon::controller::detection
