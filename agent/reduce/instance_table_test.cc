#include "agent/reduce/instance_table.h"

#include "gtest/gtest.h"

namespace falcon::agent::reduce {
namespace {

InstanceKey Collective(uint64_t comm, uint64_t index) {
  InstanceKey k;
  k.comm_id = comm;
  k.index = index;
  return k;
}

TEST(InstanceTableTest, LatestStartOnlyOnceEveryParticipantReported) {
  InstanceTable table(/*ttl_ns=*/1000);
  const InstanceKey k = Collective(7, 0);
  table.Report(k, 3, 100, 0);
  table.Report(k, 3, 130, 0);
  EXPECT_FALSE(table.LatestStart(k).has_value());
  table.Report(k, 3, 110, 0);
  ASSERT_TRUE(table.LatestStart(k).has_value());
  EXPECT_EQ(*table.LatestStart(k), 130);
}

TEST(InstanceTableTest, EntryGoesWhenAllConsumed) {
  InstanceTable table(1000);
  const InstanceKey k = Collective(7, 0);
  table.Report(k, 2, 100, 0);
  table.Report(k, 2, 120, 0);
  table.Consume(k);
  EXPECT_EQ(table.size(), 1u);
  table.Consume(k);
  EXPECT_EQ(table.size(), 0u);
  table.Expire(10);  // Pops the stale age record; nothing expires.
  EXPECT_EQ(table.expired(), 0u);
}

TEST(InstanceTableTest, IncompleteEntriesExpireAfterTtl) {
  InstanceTable table(1000);
  table.Report(Collective(7, 0), 2, 100, /*now_ns=*/0);
  table.Report(Collective(7, 1), 2, 200, /*now_ns=*/800);
  table.Expire(1500);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.expired(), 1u);
  table.Expire(1900);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.expired(), 2u);
}

TEST(InstanceTableTest, KeysDifferByDirectionAndIndex) {
  InstanceTable table(1000);
  InstanceKey ab{9, 0, 1, 0};
  InstanceKey ba{9, 1, 0, 0};
  table.Report(ab, 2, 10, 0);
  table.Report(ba, 2, 20, 0);
  EXPECT_FALSE(table.LatestStart(ab).has_value());
  table.Report(ab, 2, 15, 0);
  EXPECT_EQ(*table.LatestStart(ab), 15);
  EXPECT_FALSE(table.LatestStart(ba).has_value());
}

}  // namespace
}  // namespace falcon::agent::reduce
