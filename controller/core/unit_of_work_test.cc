#include "controller/core/unit_of_work.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/id_allocator.h"
#include "controller/store/in_memory_kv_store.h"
#include "gtest/gtest.h"

namespace falcon::controller::core {
namespace {

TEST(UnitOfWorkTest, ActionsRunOnlyAfterADurableCommit) {
  common::FakeClock clock;
  store::InMemoryKvStore kv(store::ControllerStore::TableNames());
  store::ControllerStore store(&kv, &clock);
  std::vector<int> order;
  {
    UnitOfWork uow;
    IdAllocator ids(falcon::controller::v1::MetaRecord{});
    EXPECT_EQ(ids.NextEventId(&uow.txn()), 1u);
    uow.AfterCommit([&] {
      // The write is visible when the action runs.
      order.push_back(static_cast<int>(store.LoadMeta()->next_event_id()));
    });
    ASSERT_TRUE(uow.Commit(&store).ok());
  }
  EXPECT_EQ(order, std::vector<int>{2});
  {
    kv.FailWritesForTest(absl::UnavailableError("full"));
    UnitOfWork uow;
    IdAllocator ids(*store.LoadMeta());
    EXPECT_EQ(ids.NextEventId(&uow.txn()), 2u);
    uow.AfterCommit([&] { order.push_back(-1); });
    EXPECT_FALSE(uow.Commit(&store).ok());
    EXPECT_EQ(uow.pending_actions(), 0u);
  }
  EXPECT_EQ(order, std::vector<int>{2});
}

// A record changed many times in one unit is staged once, in its state at the commit.
TEST(UnitOfWorkTest, StagedOnceBeforeCommitInItsFinalState) {
  common::FakeClock clock;
  store::InMemoryKvStore kv(store::ControllerStore::TableNames());
  store::ControllerStore store(&kv, &clock);
  UnitOfWork uow;
  falcon::controller::v1::EventRecord event;
  event.mutable_event()->set_event_id(7);
  int staged = 0;
  for (int i = 0; i < 100; ++i) {
    event.add_onset_series("rank/" + std::to_string(i));
    uow.StageOnceBeforeCommit("event/7", [&] {
      ++staged;
      uow.txn().PutEvent(event);
    });
  }
  EXPECT_EQ(staged, 0);
  ASSERT_TRUE(uow.Commit(&store).ok());
  EXPECT_EQ(staged, 1);
  auto events = store.LoadEvents();
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->at(0).onset_series_size(), 100);
  // The next unit stages it again.
  uow.StageOnceBeforeCommit("event/7", [&] { ++staged; });
  ASSERT_TRUE(uow.Commit(&store).ok());
  EXPECT_EQ(staged, 2);
}

TEST(IdAllocatorTest, NeverRepeatsAcrossReload) {
  common::FakeClock clock;
  store::InMemoryKvStore kv(store::ControllerStore::TableNames());
  store::ControllerStore store(&kv, &clock);
  store::StoreTxn txn;
  IdAllocator ids(*store.LoadMeta());
  EXPECT_EQ(ids.NextTaskId(&txn), 1u);
  EXPECT_EQ(ids.NextTaskId(&txn), 2u);
  EXPECT_EQ(ids.NextDirectiveId(&txn), 1u);
  ASSERT_TRUE(store.Commit(&txn).ok());
  IdAllocator reloaded(*store.LoadMeta());
  EXPECT_EQ(reloaded.NextTaskId(&txn), 3u);
  EXPECT_EQ(reloaded.NextDirectiveId(&txn), 2u);
  EXPECT_EQ(reloaded.NextEventId(&txn), 1u);
}

}  // namespace
}  // namespace falcon::controller::core
