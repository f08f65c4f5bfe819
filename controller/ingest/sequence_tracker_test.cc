#include "controller/ingest/sequence_tracker.h"

#include "gtest/gtest.h"

namespace falcon::controller::ingest {
namespace {

TEST(SequenceTrackerTest, InOrderAdvancesWatermark) {
  SequenceTracker t;
  EXPECT_FALSE(t.IsDuplicate(1));
  t.MarkStored(1);
  t.MarkStored(2);
  EXPECT_EQ(t.acked_sequence(), 2u);
  EXPECT_TRUE(t.IsDuplicate(1));
  EXPECT_TRUE(t.IsDuplicate(2));
  EXPECT_FALSE(t.IsDuplicate(3));
}

TEST(SequenceTrackerTest, GapsAreRememberedAndFilled) {
  SequenceTracker t;
  t.MarkStored(1);
  t.MarkStored(3);
  t.MarkStored(4);
  EXPECT_EQ(t.acked_sequence(), 1u);
  EXPECT_TRUE(t.IsDuplicate(3));
  EXPECT_FALSE(t.IsDuplicate(2));
  t.MarkStored(2);
  EXPECT_EQ(t.acked_sequence(), 4u);
  EXPECT_EQ(t.stored_above_count(), 0u);
}

TEST(SequenceTrackerTest, HelloForgetsWhatTheAgentNoLongerHolds) {
  SequenceTracker t;
  t.MarkStored(1);
  t.MarkStored(5);
  t.ForgetBelow(4);  // The agent lost 2 and 3 (buffer overflow): they will never come.
  EXPECT_EQ(t.acked_sequence(), 3u);
  EXPECT_FALSE(t.IsDuplicate(4));
  EXPECT_TRUE(t.IsDuplicate(5));
  t.MarkStored(4);
  EXPECT_EQ(t.acked_sequence(), 5u);
  t.ForgetBelow(2);  // Older than the watermark: no effect.
  t.ForgetBelow(0);  // 0 = the agent holds nothing.
  EXPECT_EQ(t.acked_sequence(), 5u);
}

TEST(SequenceTrackerTest, RecordRoundTrip) {
  SequenceTracker t;
  t.MarkStored(1);
  t.MarkStored(7);
  falcon::controller::v1::AgentRecord r;
  t.ToRecord(&r);
  SequenceTracker back(r);
  EXPECT_EQ(back.acked_sequence(), 1u);
  EXPECT_TRUE(back.IsDuplicate(7));
  EXPECT_FALSE(back.IsDuplicate(6));
}

TEST(SequenceTrackerTest, MemoryIsBounded) {
  SequenceTracker t;
  for (uint64_t s = 2; s < 2 + 2 * (SequenceTracker::kMaxStoredAbove + 10); s += 2) t.MarkStored(s);
  EXPECT_LE(t.stored_above_count(), SequenceTracker::kMaxStoredAbove);
  EXPECT_GT(t.acked_sequence(), 0u);
}

}  // namespace
}  // namespace falcon::controller::ingest
