#include "agent/telemetry_buffer.h"

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

v1::TelemetryBatch Summaries(int iteration_from, int n, int comms = 4) {
  v1::TelemetryBatch b;
  b.set_job("job");
  for (int i = 0; i < n; ++i) {
    v1::IterationSummary* s = b.add_iterations();
    s->set_rank(i % 8);
    s->set_iteration(iteration_from + i);
    s->set_start_ns(1'000'000'000'000 + int64_t{i} * 100'000'000);
    s->set_iteration_time_ns(100'000'000 + i);
    s->set_compute_ns(60'000'000);
    for (int c = 0; c < comms; ++c) {
      v1::CommIterationSummary* cs = s->add_comms();
      cs->set_comm_id(0x1234567800000000ull + c);
      cs->set_op_count(4);
      cs->set_bytes(64 << 20);
      cs->set_busy_ns(10'000'000);
      cs->set_wait_ns(2'000'000);
      cs->set_transfer_ns(8'000'000);
    }
  }
  return b;
}

v1::TelemetryBatch RawOps(int n) {
  v1::TelemetryBatch b;
  b.set_job("job");
  for (int i = 0; i < n; ++i) b.add_ops()->set_seq(i + 1);
  return b;
}

std::vector<uint64_t> DrainSequences(TelemetryBuffer& buf) {
  std::vector<uint64_t> seqs;
  while (auto b = buf.NextToSend()) seqs.push_back(b->sequence());
  return seqs;
}

TEST(TelemetryBufferTest, NumbersAtFirstSendAndResendsUnackedInOrder) {
  TelemetryBuffer buf({});
  for (int i = 0; i < 5; ++i) buf.Push(Summaries(i, 1));
  buf.OnConnected(0);
  EXPECT_EQ(buf.FirstUnacked(), 0u);  // Nothing numbered yet.
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  buf.Ack(2);
  EXPECT_EQ(buf.FirstUnacked(), 3u);
  // The stream breaks; 3..5 were sent but not acked. The controller stored 3 before dying.
  buf.Push(Summaries(5, 1));
  buf.OnConnected(3);
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{4, 5, 6}));
  const auto s = buf.stats();
  EXPECT_EQ(s.sent_batches, 6u);
  EXPECT_EQ(s.resent_batches, 2u);
  buf.Ack(6);
  EXPECT_TRUE(buf.Empty());
}

TEST(TelemetryBufferTest, NewNumbersExceedWhatTheControllerHolds) {
  // A restarted agent (empty buffer) must not reuse sequences the controller already stored.
  TelemetryBuffer buf({});
  buf.Push(Summaries(0, 1));
  buf.OnConnected(500);
  auto b = buf.NextToSend();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->sequence(), 501u);
}

TEST(TelemetryBufferTest, DropsOldestWhenFullAndStampsTheCount) {
  TelemetryBuffer::Options o;
  o.max_batches = 3;
  TelemetryBuffer buf(o);
  for (int i = 0; i < 5; ++i) buf.Push(Summaries(i * 10, 10));
  auto s = buf.stats();
  EXPECT_EQ(s.batches, 3u);
  EXPECT_EQ(s.dropped_batches, 2u);
  EXPECT_EQ(s.dropped_summaries, 20u);
  buf.OnConnected(0);
  auto first = buf.NextToSend();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->sequence(), 1u);  // No hole: dropped batches were never numbered.
  EXPECT_EQ(first->iterations(0).iteration(), 20);
  EXPECT_EQ(first->dropped_records(), 20u);
  EXPECT_EQ(buf.NextToSend()->dropped_records(), 0u);
}

TEST(TelemetryBufferTest, RawOpBatchesGoBeforeSummaries) {
  TelemetryBuffer::Options o;
  o.max_batches = 3;
  TelemetryBuffer buf(o);
  buf.Push(Summaries(0, 1));
  buf.Push(RawOps(100));
  buf.Push(Summaries(1, 1));
  buf.Push(Summaries(2, 1));
  const auto s = buf.stats();
  EXPECT_EQ(s.dropped_ops, 100u);
  EXPECT_EQ(s.dropped_summaries, 0u);
  buf.OnConnected(0);
  std::vector<int64_t> iterations;
  while (auto b = buf.NextToSend()) iterations.push_back(b->iterations(0).iteration());
  EXPECT_EQ(iterations, (std::vector<int64_t>{0, 1, 2}));
}

TEST(TelemetryBufferTest, NumberedBatchesAreDroppedOnlyFromTheFront) {
  TelemetryBuffer::Options o;
  o.max_batches = 2;
  TelemetryBuffer buf(o);
  buf.Push(Summaries(0, 1));
  buf.Push(Summaries(1, 1));
  buf.OnConnected(0);
  DrainSequences(buf);  // 1 and 2 sent, then the controller goes away.
  buf.Push(Summaries(2, 1));
  EXPECT_EQ(buf.FirstUnacked(), 2u);  // 1 was dropped; AgentHello tells the controller.
  buf.OnConnected(0);
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{2, 3}));
}

TEST(TelemetryBufferTest, ByteBoundHoldsTenMinutesOfSummariesForEightRanksByDefault) {
  // 8 ranks at 10 iterations/s with 4 communicators each, flushed every second: 600 batches of
  // 80 summaries must fit the default bounds without a drop.
  TelemetryBuffer buf({});
  for (int s = 0; s < 600; ++s) buf.Push(Summaries(s * 10, 80));
  const auto st = buf.stats();
  EXPECT_EQ(st.dropped_batches, 0u);
  EXPECT_EQ(st.batches, 600u);
  EXPECT_LT(st.bytes, buf.options().max_bytes);
}

TEST(TelemetryBufferTest, AnOversizedBatchIsDroppedAlone) {
  TelemetryBuffer::Options o;
  o.max_bytes = 1000;
  TelemetryBuffer buf(o);
  buf.Push(Summaries(0, 1));
  buf.Push(Summaries(0, 100));
  const auto s = buf.stats();
  EXPECT_EQ(s.batches, 1u);
  EXPECT_EQ(s.dropped_batches, 1u);
}

TEST(TelemetryBufferTest, TagsSettleWhenAckedOrDropped) {
  TelemetryBuffer buf({/*max_batches=*/2, /*max_bytes=*/size_t{1} << 20});
  std::vector<uint64_t> settled;
  buf.set_on_settled([&](const std::vector<uint64_t>& tags) {
    settled.insert(settled.end(), tags.begin(), tags.end());
  });
  buf.Push(Summaries(0, 1));  // Untagged: never reported.
  buf.Push(Summaries(1, 1), 11);
  buf.OnConnected(0);
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(settled.empty()) << "sent is not settled";
  buf.Ack(2);
  EXPECT_EQ(settled, (std::vector<uint64_t>{11}));
  buf.Push(Summaries(2, 1), 13);
  buf.Push(Summaries(3, 1), 14);
  buf.Push(Summaries(4, 1), 15);  // Full: drops the oldest (tag 13).
  EXPECT_EQ(settled, (std::vector<uint64_t>{11, 13}));
  buf.OnConnected(5);  // A reconnect: nothing of ours is numbered yet.
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{6, 7}));
  buf.Ack(7);
  EXPECT_EQ(settled, (std::vector<uint64_t>{11, 13, 14, 15}));
}

TEST(TelemetryBufferTest, WaitUntilEmptyWaitsForTheSettleCallbacks) {
  TelemetryBuffer buf({/*max_batches=*/4, /*max_bytes=*/size_t{1} << 20});
  absl::Notification in_callback;
  absl::Notification release;
  buf.set_on_settled([&](const std::vector<uint64_t>&) {
    in_callback.Notify();
    release.WaitForNotification();
  });
  buf.Push(Summaries(0, 1), 21);
  buf.OnConnected(0);
  EXPECT_EQ(DrainSequences(buf), (std::vector<uint64_t>{1}));
  std::thread acker([&] { buf.Ack(1); });
  in_callback.WaitForNotification();
  EXPECT_TRUE(buf.Empty());
  EXPECT_FALSE(buf.WaitUntilEmpty(absl::Milliseconds(20)))
      << "a settle callback still runs: its shims have not heard yet";
  release.Notify();
  acker.join();
  EXPECT_TRUE(buf.WaitUntilEmpty(absl::Seconds(30)));
}

TEST(TelemetryBufferTest, ValidateNamesTheOption) {
  TelemetryBuffer::Options o;
  o.max_batches = 0;
  EXPECT_EQ(TelemetryBuffer::Validate(o).message(), "buffer_batches: must be > 0");
}

}  // namespace
}  // namespace falcon::agent
