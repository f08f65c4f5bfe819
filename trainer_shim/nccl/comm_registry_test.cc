#include "trainer_shim/nccl/comm_registry.h"

#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace falcon::trainer_shim::nccl {
namespace {

TEST(CommIdTest, SameUniqueIdSameIdAndNeverZero) {
  char a[128] = {}, b[128] = {};
  std::strcpy(a, "unique-a");
  std::strcpy(b, "unique-b");
  EXPECT_EQ(CommIdFromUniqueId(a, sizeof(a)), CommIdFromUniqueId(a, sizeof(a)));
  EXPECT_NE(CommIdFromUniqueId(a, sizeof(a)), CommIdFromUniqueId(b, sizeof(b)));
  EXPECT_NE(CommIdFromUniqueId(a, 0), 0u);
}

TEST(CommIdTest, SplitIdsDifferByIndexAndColor) {
  const uint64_t parent = 0x1234;
  EXPECT_EQ(SplitCommId(parent, 0, 1), SplitCommId(parent, 0, 1));
  EXPECT_NE(SplitCommId(parent, 0, 1), SplitCommId(parent, 0, 2));
  EXPECT_NE(SplitCommId(parent, 0, 1), SplitCommId(parent, 1, 1));
  EXPECT_NE(SplitCommId(parent, 0, 1), SplitCommId(parent + 1, 0, 1));
}

TEST(CheckGatheredMembersTest, AcceptsAConsistentGather) {
  auto m = CheckGatheredMembers({4, 6, 2}, 1, 6, 8);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (std::vector<uint32_t>{4, 6, 2}));
}

TEST(CheckGatheredMembersTest, RejectsInconsistentGathers) {
  EXPECT_NE(CheckGatheredMembers({4, 5}, 1, 6, 8).status().message().find("members[1]"),
            std::string::npos);
  EXPECT_NE(CheckGatheredMembers({6, 6}, 0, 6, 8).status().message().find("duplicate"),
            std::string::npos);
  EXPECT_NE(CheckGatheredMembers({6, 9}, 0, 6, 8).status().message().find("outside world"),
            std::string::npos);
  EXPECT_NE(CheckGatheredMembers({6, -1}, 0, 6, 8).status().message().find("members[1]"),
            std::string::npos);
  EXPECT_FALSE(CheckGatheredMembers({6}, 3, 6, 8).ok());
}

TEST(CommRegistryTest, AddLookupPeersRemove) {
  CommRegistry reg;
  int comm_a = 0, comm_b = 0;
  reg.Add(&comm_a, {11, 1, 3, {}});
  uint64_t id = 0;
  int rank = -1, size = -1;
  ASSERT_TRUE(reg.Lookup(&comm_a, &id, &rank, &size));
  EXPECT_EQ(id, 11u);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 3);
  EXPECT_FALSE(reg.Lookup(&comm_b, &id, &rank, &size));
  EXPECT_EQ(reg.GlobalPeer(&comm_a, 2), -1) << "members unknown yet";
  EXPECT_TRUE(reg.SetMembers(&comm_a, {7, 3, 9}));
  EXPECT_EQ(reg.GlobalPeer(&comm_a, 2), 9);
  EXPECT_EQ(reg.GlobalPeer(&comm_a, 3), -1);
  EXPECT_FALSE(reg.SetMembers(&comm_b, {1}));
  reg.Remove(&comm_a);
  EXPECT_FALSE(reg.Lookup(&comm_a, &id, &rank, &size)) << "the per-thread cache is invalidated";
  EXPECT_EQ(reg.size(), 0u);
}

TEST(CommRegistryTest, OpsByPluginIsSeenThroughTheCache) {
  CommRegistry reg;
  int comm = 0, other = 0;
  reg.Add(&comm, {5, 0, 2, {}});
  uint64_t id = 0;
  int rank = 0, size = 0;
  bool by_plugin = true;
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size, &by_plugin));
  EXPECT_FALSE(by_plugin);
  EXPECT_TRUE(reg.SetOpsByPlugin(&comm));
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size, &by_plugin));
  EXPECT_TRUE(by_plugin) << "the per-thread cache is invalidated";
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size, &by_plugin));  // From the cache.
  EXPECT_TRUE(by_plugin);
  EXPECT_TRUE(reg.SetMembers(&comm, {0, 1}));
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size, &by_plugin));
  EXPECT_TRUE(by_plugin) << "kept when members change";
  EXPECT_FALSE(reg.SetOpsByPlugin(&other));
}

TEST(CommRegistryTest, ReusedHandleSeesTheNewEntry) {
  CommRegistry reg;
  int comm = 0;
  uint64_t id = 0;
  int rank = 0, size = 0;
  reg.Add(&comm, {1, 0, 2, {}});
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size));
  reg.Remove(&comm);
  reg.Add(&comm, {2, 1, 4, {}});  // Same address, new communicator.
  ASSERT_TRUE(reg.Lookup(&comm, &id, &rank, &size));
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(size, 4);
}

TEST(CommRegistryTest, SplitIndexCountsPerParent) {
  CommRegistry reg;
  int p1 = 0, p2 = 0;
  EXPECT_EQ(reg.NextSplitIndex(&p1), 0u);
  EXPECT_EQ(reg.NextSplitIndex(&p1), 1u);
  EXPECT_EQ(reg.NextSplitIndex(&p2), 0u);
}

TEST(CommRegistryTest, ConcurrentLookupsWhileCommsChange) {
  CommRegistry reg;
  int stable = 0;
  reg.Add(&stable, {5, 0, 2, {8, 9}});
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    uint64_t id = 0;
    int rank = 0, size = 0;
    while (!stop.load()) {
      if (!reg.Lookup(&stable, &id, &rank, &size) || id != 5 || reg.GlobalPeer(&stable, 1) != 9) {
        ++bad;
      }
    }
  });
  std::vector<int> others(200);
  for (int& o : others) {
    reg.Add(&o, {7, 0, 1, {}});
    reg.SetMembers(&o, {1});
    reg.Remove(&o);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl
