#include "trainer_shim/outbox.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

std::vector<OpRecord> Records(uint64_t first_seq, size_t n) {
  std::vector<OpRecord> out(n);
  for (size_t i = 0; i < n; ++i) out[i].seq = first_seq + i;
  return out;
}

std::vector<uint64_t> Seqs(const Outbox::Batch& b) {
  std::vector<uint64_t> out;
  for (const OpRecord& r : b.records) out.push_back(r.seq);
  return out;
}

TEST(OutboxTest, BatchesAreSealedAtTheSizeLimitAndOnFlush) {
  Outbox box({/*max_records=*/100, /*max_batch_records=*/4});
  auto recs = Records(1, 10);
  box.Add(recs.data(), recs.size());
  EXPECT_EQ(box.sealed_batches(), 2u) << "two full batches; two records stay open";
  box.SealOpen();
  EXPECT_EQ(box.sealed_batches(), 3u);
  box.SealOpen();
  EXPECT_EQ(box.sealed_batches(), 3u) << "an empty open batch is not sealed";
  std::vector<uint64_t> sequences;
  while (const Outbox::Batch* b = box.NextToSend()) {
    sequences.push_back(b->sequence);
    box.MarkSent(b->sequence);
  }
  EXPECT_EQ(sequences, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(box.held_records(), 10u);
  EXPECT_EQ(box.first_unacked_sequence(), 1u);
}

TEST(OutboxTest, AckReleasesUpToTheSequence) {
  Outbox box({100, 2});
  auto recs = Records(1, 6);
  box.Add(recs.data(), recs.size());
  EXPECT_EQ(box.Ack(2), 4u);
  EXPECT_EQ(box.first_unacked_sequence(), 3u);
  EXPECT_EQ(box.held_records(), 2u);
  EXPECT_EQ(box.Ack(2), 0u) << "a repeated ack releases nothing";
  EXPECT_EQ(box.Ack(3), 2u);
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(box.first_unacked_sequence(), 0u);
}

TEST(OutboxTest, ReconnectResendsEverythingTheAgentDoesNotHold) {
  Outbox box({100, 2});
  auto recs = Records(1, 8);
  box.Add(recs.data(), recs.size());  // Batches 1..4.
  while (const Outbox::Batch* b = box.NextToSend()) box.MarkSent(b->sequence);
  box.Ack(1);
  EXPECT_EQ(box.NextToSend(), nullptr);
  // The new agent already holds batch 2 (e.g. it persisted it): resend from 3.
  box.OnReconnect(2);
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_EQ(box.NextToSend()->sequence, 3u);
  EXPECT_EQ(Seqs(*box.NextToSend()), (std::vector<uint64_t>{5, 6}));
  // A fresh agent holds nothing: everything still held goes again.
  box.MarkSent(3);
  box.OnReconnect(0);
  EXPECT_EQ(box.NextToSend()->sequence, 3u);
}

TEST(OutboxTest, KeepsTheNewestRecordsAtTheBoundAndReportsDrops) {
  Outbox box({/*max_records=*/8, /*max_batch_records=*/4});
  auto recs = Records(1, 20);
  box.Add(recs.data(), recs.size());
  box.SealOpen();
  EXPECT_LE(box.held_records(), 8u);
  EXPECT_EQ(box.evicted_records(), 20u - box.held_records());
  std::vector<uint64_t> kept;
  uint64_t reported_dropped = 0;
  while (const Outbox::Batch* b = box.NextToSend()) {
    for (uint64_t s : Seqs(*b)) kept.push_back(s);
    reported_dropped += b->dropped_records;
    box.MarkSent(b->sequence);
  }
  EXPECT_EQ(kept, (std::vector<uint64_t>{13, 14, 15, 16, 17, 18, 19, 20}));
  EXPECT_EQ(reported_dropped, 12u) << "every dropped record is reported once";
}

TEST(OutboxTest, EvictingASentBatchKeepsTheSendCursorRight) {
  Outbox box({4, 2});
  auto first = Records(1, 4);
  box.Add(first.data(), first.size());  // Batches 1, 2.
  box.MarkSent(1);
  auto more = Records(5, 2);
  box.Add(more.data(), more.size());  // Evicts batch 1 (sent), seals batch 3.
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_EQ(box.NextToSend()->sequence, 2u);
}

TEST(OutboxTest, RingDropsAreReportedInTheNextBatch) {
  Outbox box({100, 10});
  box.AddDropped(5);
  auto recs = Records(1, 3);
  box.Add(recs.data(), recs.size());
  box.SealOpen();
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_EQ(box.NextToSend()->dropped_records, 5u);
  box.MarkSent(1);
  box.AddDropped(2);
  box.SealOpen();  // Drops alone still produce a (record-less) batch so the agent learns of them.
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_TRUE(box.NextToSend()->records.empty());
  EXPECT_EQ(box.NextToSend()->dropped_records, 2u);
}

}  // namespace
}  // namespace falcon::trainer_shim
