#include "agent/reduce/job_reducer.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::agent::reduce {
namespace {

constexpr int64_t kMs = 1000 * 1000;
constexpr int64_t kSec = 1000 * kMs;

v1::Communicator Comm(uint64_t id, std::vector<uint32_t> members,
                      v1::CommKind kind = v1::COMM_KIND_DP) {
  v1::Communicator c;
  c.set_comm_id(id);
  c.set_kind(kind);
  for (uint32_t m : members) c.add_member_ranks(m);
  return c;
}

v1::OpRecord Rec(uint64_t comm, int64_t start, int64_t end, int64_t iteration,
                 v1::OpKind kind = v1::OP_KIND_ALL_REDUCE, int32_t peer = -1) {
  v1::OpRecord r;
  r.set_comm_id(comm);
  r.set_op_kind(kind);
  r.set_bytes(1024);
  r.set_peer(peer);
  r.set_host_start_ns(start);
  r.set_host_end_ns(end);
  r.set_iteration(iteration);
  return r;
}

v1::IterationHint Hint(int64_t iteration, int64_t start, int64_t end) {
  v1::IterationHint h;
  h.set_iteration(iteration);
  h.set_start_ns(start);
  h.set_end_ns(end);
  return h;
}

google::protobuf::RepeatedPtrField<v1::OpRecord> Ops(std::vector<v1::OpRecord> v) {
  google::protobuf::RepeatedPtrField<v1::OpRecord> out;
  for (auto& r : v) *out.Add() = std::move(r);
  return out;
}

const v1::CommIterationSummary* FindComm(const v1::IterationSummary& s, uint64_t comm) {
  for (const auto& c : s.comms()) {
    if (c.comm_id() == comm) return &c;
  }
  return nullptr;
}

// Two local ranks in a DP all-reduce; rank 1 computes 3 ms longer, so rank 0 waits 3 ms for it
// inside the all-reduce, which then moves data for 2 ms.
class SlowComputeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reducer_.AddRank(0);
    reducer_.AddRank(1);
    reducer_.AddCommunicator(Comm(10, {0, 1}));
    for (int i = 0; i < 3; ++i) {
      const int64_t t = i * 20 * kMs;
      // Rank 0: compute 5 ms, all-reduce [5, 10) ms (3 ms waiting + 2 ms transfer).
      reducer_.AddOps(0, Ops({Rec(10, t + 5 * kMs, t + 10 * kMs, i)}), 0);
      reducer_.AddHint(0, Hint(i, t, t + 20 * kMs), 0);
      // Rank 1: compute 8 ms, all-reduce [8, 10) ms.
      reducer_.AddOps(1, Ops({Rec(10, t + 8 * kMs, t + 10 * kMs, i)}), 0);
      reducer_.AddHint(1, Hint(i, t, t + 20 * kMs), 0);
    }
  }
  JobReducer reducer_{{}};
};

TEST_F(SlowComputeTest, WaitIsTheSpreadOfStartTimes) {
  std::vector<v1::IterationSummary> out;
  reducer_.Flush(0, false, &out);
  // Iterations 0 and 1 are complete on both ranks (an op of a later iteration arrived).
  ASSERT_EQ(out.size(), 4u);
  for (const auto& s : out) {
    EXPECT_TRUE(s.from_hint());
    EXPECT_EQ(s.iteration_time_ns(), 20 * kMs);
    const auto* c = FindComm(s, 10);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->op_count(), 1u);
    EXPECT_EQ(c->bytes(), 1024u);
    if (s.rank() == 0) {
      EXPECT_EQ(c->busy_ns(), 5 * kMs);
      EXPECT_EQ(c->wait_ns(), 3 * kMs);
      EXPECT_EQ(c->transfer_ns(), 2 * kMs);
      EXPECT_EQ(s.compute_ns(), 15 * kMs);
    } else {
      EXPECT_EQ(c->busy_ns(), 2 * kMs);
      EXPECT_EQ(c->wait_ns(), 0);
      EXPECT_EQ(c->transfer_ns(), 2 * kMs);
      EXPECT_EQ(s.compute_ns(), 18 * kMs);
    }
  }
  EXPECT_EQ(reducer_.stats().matched_ops, 4u);
  out.clear();
  reducer_.Flush(0, /*drain=*/true, &out);
  EXPECT_EQ(out.size(), 2u);  // Iteration 2 of both ranks.
  EXPECT_EQ(reducer_.stats().instances, 0u);
}

TEST(JobReducerTest, RemoteMembersGiveNoWaitEstimate) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0, 5}));  // Rank 5 is on another node.
  reducer.AddOps(0, Ops({Rec(10, 5 * kMs, 10 * kMs, 0), Rec(10, 25 * kMs, 26 * kMs, 1)}), 0);
  reducer.AddHint(0, Hint(0, 0, 20 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].comms(0).wait_ns(), 0);
  EXPECT_EQ(out[0].comms(0).transfer_ns(), 5 * kMs);
  EXPECT_EQ(reducer.stats().unmatched_ops, 1u);
}

TEST(JobReducerTest, PeerTransfersAreNotBusyTime) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0, 5}));
  // The all-reduce's network part to rank 5, timed by the profiler plugin, overlaps the op.
  reducer.AddOps(
      0,
      Ops({Rec(10, 5 * kMs, 10 * kMs, 0), Rec(10, 6 * kMs, 9 * kMs, 0, v1::OP_KIND_PEER_SEND, 5),
           Rec(10, 25 * kMs, 26 * kMs, 1)}),
      0);
  reducer.AddHint(0, Hint(0, 0, 20 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].comms(0).op_count(), 1u);
  EXPECT_EQ(out[0].comms(0).busy_ns(), 5 * kMs);
  EXPECT_EQ(out[0].compute_ns(), 15 * kMs);
}

TEST(JobReducerTest, DeviceTimeSplitsWaitWhenProfiled) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0, 5}));
  v1::OpRecord r = Rec(10, 5 * kMs, 10 * kMs, 0);
  r.set_device_duration_ns(1 * kMs);
  reducer.AddOps(0, Ops({r, Rec(10, 25 * kMs, 26 * kMs, 1)}), 0);
  reducer.AddHint(0, Hint(0, 0, 20 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].comms(0).wait_ns(), 4 * kMs);
  EXPECT_EQ(out[0].comms(0).transfer_ns(), 1 * kMs);
}

TEST(JobReducerTest, PointToPointPairsSendWithRecv) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddRank(1);
  reducer.AddCommunicator(Comm(20, {0, 1}, v1::COMM_KIND_PP));
  // Rank 0 sends at 2 ms; rank 1 posts its receive at 6 ms: the sender waits 4 ms.
  reducer.AddOps(0,
                 Ops({Rec(20, 2 * kMs, 7 * kMs, 0, v1::OP_KIND_SEND, 1),
                      Rec(20, 12 * kMs, 13 * kMs, 1, v1::OP_KIND_SEND, 1)}),
                 0);
  reducer.AddOps(1,
                 Ops({Rec(20, 6 * kMs, 7 * kMs, 0, v1::OP_KIND_RECV, 0),
                      Rec(20, 12 * kMs, 13 * kMs, 1, v1::OP_KIND_RECV, 0)}),
                 0);
  reducer.AddHint(0, Hint(0, 0, 10 * kMs), 0);
  reducer.AddHint(1, Hint(0, 0, 10 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].rank(), 0u);
  EXPECT_EQ(out[0].comms(0).wait_ns(), 4 * kMs);
  EXPECT_EQ(out[0].comms(0).transfer_ns(), 1 * kMs);
  EXPECT_EQ(out[1].comms(0).wait_ns(), 0);
}

TEST(JobReducerTest, WaitsForOtherParticipantsUpToTheHold) {
  JobReducer::Options options;
  options.match_hold = absl::Seconds(2);
  JobReducer reducer(options);
  reducer.AddRank(0);
  reducer.AddRank(1);
  reducer.AddCommunicator(Comm(10, {0, 1}));
  reducer.AddOps(0, Ops({Rec(10, 5 * kMs, 10 * kMs, 0), Rec(10, 25 * kMs, 26 * kMs, 1)}), 0);
  reducer.AddHint(0, Hint(0, 0, 20 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(1 * kSec, false, &out);  // Draft complete at 1 s; rank 1 not reported yet.
  EXPECT_TRUE(out.empty());
  reducer.Flush(2 * kSec, false, &out);
  EXPECT_TRUE(out.empty());
  reducer.Flush(3 * kSec, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].comms(0).wait_ns(), 0);
}

TEST(JobReducerTest, IterationsStayStrictlyIncreasingAcrossRestartsOfARank) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0}));
  reducer.AddHint(0, Hint(5, 0, 10 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, true, &out);
  ASSERT_EQ(out.size(), 1u);
  reducer.ResetRank(0, /*new_epoch=*/false, 0);  // Trainer restarted, same epoch.
  reducer.AddHint(0, Hint(3, 20 * kMs, 30 * kMs), 0);
  reducer.Flush(0, true, &out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(reducer.stats().stale_iterations, 1u);
  reducer.ResetRank(0, /*new_epoch=*/true, 0);  // S4 restart: a new epoch starts over.
  reducer.AddHint(0, Hint(3, 40 * kMs, 50 * kMs), 0);
  reducer.Flush(0, true, &out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(JobReducerTest, RestartedRankKeepsTheOldProcesssLastIteration) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0}));
  reducer.AddOps(0, Ops({Rec(10, 2 * kMs, 3 * kMs, 7)}), 0);
  reducer.AddHint(0, Hint(7, 0, 10 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  EXPECT_TRUE(out.empty());  // Iteration 7 may still get late ops.
  reducer.ResetRank(0, /*new_epoch=*/false, 0);
  reducer.Flush(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].iteration(), 7);
  EXPECT_EQ(out[0].comms(0).busy_ns(), 1 * kMs);
}

// A rank resumed by a new agent after iteration 7 was delivered by an earlier one: resent data of
// iteration 7 makes no summary, iteration 8 does; numbering without hints would go on at 8.
TEST(JobReducerTest, ContinueAfterDropsWhatAnEarlierAgentDelivered) {
  JobReducer reducer({});
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0}));
  reducer.ContinueAfter(0, 7);
  EXPECT_EQ(reducer.rank_reducer(0)->next_period_iteration(), 8);
  reducer.AddOps(0, Ops({Rec(10, 2 * kMs, 3 * kMs, 7), Rec(10, 12 * kMs, 13 * kMs, 8)}), 0);
  reducer.AddHint(0, Hint(7, 0, 10 * kMs), 0);
  reducer.AddHint(0, Hint(8, 10 * kMs, 20 * kMs), 0);
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, true, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].iteration(), 8);
  EXPECT_EQ(reducer.stats().stale_iterations, 1u);
  reducer.ContinueAfter(0, 3);  // Never moves back.
  EXPECT_EQ(reducer.rank_reducer(0)->next_period_iteration(), 8);
}

TEST(JobReducerTest, PeriodModeWithoutHints) {
  JobReducer::Options options;
  options.rank.tracker.redetect_every = 128;
  JobReducer reducer(options);
  reducer.AddRank(0);
  reducer.AddCommunicator(Comm(10, {0, 3}));
  reducer.AddCommunicator(Comm(11, {0, 4}, v1::COMM_KIND_PP));
  for (int i = 0; i < 200; ++i) {
    const int64_t t = i * 10 * kMs;
    reducer.AddOps(0,
                   Ops({Rec(11, t + 1 * kMs, t + 2 * kMs, -1, v1::OP_KIND_SEND, 4),
                        Rec(11, t + 3 * kMs, t + 4 * kMs, -1, v1::OP_KIND_RECV, 4),
                        Rec(10, t + 6 * kMs, t + 9 * kMs, -1)}),
                   0);
  }
  std::vector<v1::IterationSummary> out;
  reducer.Flush(0, false, &out);
  ASSERT_GT(out.size(), 100u);
  for (const auto& s : out) {
    EXPECT_FALSE(s.from_hint());
    EXPECT_EQ(s.iteration_time_ns(), 10 * kMs);
    EXPECT_EQ(s.compute_ns(), 5 * kMs);
    ASSERT_EQ(s.comms_size(), 2);
    EXPECT_EQ(FindComm(s, 11)->op_count(), 2u);
    EXPECT_EQ(FindComm(s, 10)->busy_ns(), 3 * kMs);
  }
}

}  // namespace
}  // namespace falcon::agent::reduce
