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

TEST(OutboxTest, ReleaseForgetsUpToTheSequence) {
  Outbox box({100, 2});
  auto recs = Records(1, 6);
  box.Add(recs.data(), recs.size());
  EXPECT_EQ(box.Release(2), 4u);
  EXPECT_EQ(box.first_unacked_sequence(), 3u);
  EXPECT_EQ(box.held_records(), 2u);
  EXPECT_EQ(box.Release(2), 0u) << "a repeated release frees nothing";
  EXPECT_EQ(box.Release(3), 2u);
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(box.first_unacked_sequence(), 0u);
}

TEST(OutboxTest, AcceptedBatchesAreHeldUntilReleasedAndNotSentAgain) {
  Outbox box({100, 2});
  auto recs = Records(1, 6);
  box.Add(recs.data(), recs.size());  // Batches 1..3.
  while (const Outbox::Batch* b = box.NextToSend()) box.MarkSent(b->sequence);
  EXPECT_FALSE(box.all_accepted()) << "sent is not accepted";
  box.Accept(3);
  EXPECT_EQ(box.held_records(), 6u) << "accepted is not delivered";
  EXPECT_TRUE(box.all_accepted());
  // The same agent again (it holds everything up to 3): nothing to resend.
  box.OnReconnect(3);
  EXPECT_EQ(box.NextToSend(), nullptr);
  EXPECT_EQ(box.Release(1), 2u);
  EXPECT_EQ(box.first_unacked_sequence(), 2u);
}

TEST(OutboxTest, ANewAgentGetsEverythingTheOldOneDidNotDeliver) {
  Outbox box({100, 2});
  auto recs = Records(1, 8);
  box.Add(recs.data(), recs.size());  // Batches 1..4.
  while (const Outbox::Batch* b = box.NextToSend()) box.MarkSent(b->sequence);
  box.Accept(4);
  box.Release(1);  // The old agent delivered batch 1, then died.
  box.OnReconnect(0);
  std::vector<uint64_t> resent;
  while (const Outbox::Batch* b = box.NextToSend()) {
    resent.push_back(b->sequence);
    box.MarkSent(b->sequence);
  }
  EXPECT_EQ(resent, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(box.held_records(), 6u);
}

TEST(OutboxTest, EvictingAcceptedBatchesIsCountedApartAndNotReportedAsDropped) {
  Outbox box({/*max_records=*/4, /*max_batch_records=*/2});
  auto first = Records(1, 4);
  box.Add(first.data(), first.size());  // Batches 1, 2.
  while (const Outbox::Batch* b = box.NextToSend()) box.MarkSent(b->sequence);
  box.Accept(2);
  auto more = Records(5, 4);
  box.Add(more.data(), more.size());  // Evicts batches 1 and 2 (accepted), seals 3 and 4.
  EXPECT_EQ(box.evicted_accepted_records(), 4u);
  EXPECT_EQ(box.evicted_records(), 0u);
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_EQ(box.NextToSend()->sequence, 3u);
  EXPECT_EQ(box.NextToSend()->dropped_records, 0u) << "the agent holds them: nothing was lost";
}

TEST(OutboxTest, ReconnectResendsEverythingTheAgentDoesNotHold) {
  Outbox box({100, 2});
  auto recs = Records(1, 8);
  box.Add(recs.data(), recs.size());  // Batches 1..4.
  while (const Outbox::Batch* b = box.NextToSend()) box.MarkSent(b->sequence);
  box.Release(1);
  EXPECT_EQ(box.NextToSend(), nullptr);
  // The agent already holds batch 2: resend from 3.
  box.OnReconnect(2);
  ASSERT_NE(box.NextToSend(), nullptr);
  EXPECT_EQ(box.NextToSend()->sequence, 3u);
  EXPECT_EQ(Seqs(*box.NextToSend()), (std::vector<uint64_t>{5, 6}));
  // A fresh agent holds nothing: everything still held goes again.
  box.MarkSent(3);
  box.OnReconnect(0);
  EXPECT_EQ(box.NextToSend()->sequence, 2u) << "held, so not delivered: batch 2 goes again too";
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
