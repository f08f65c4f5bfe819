#include "controller/service/event_loop.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace falcon::controller::service {
namespace {

TEST(EventLoopTest, RunsInOrderOnOneThread) {
  EventLoop loop;
  std::vector<int> order;
  std::thread::id loop_thread;
  for (int i = 0; i < 100; ++i) {
    loop.Post([&, i] {
      order.push_back(i);
      loop_thread = std::this_thread::get_id();
    });
  }
  bool in_loop = false;
  loop.RunSync([&] { in_loop = loop.InLoopThread(); });
  EXPECT_TRUE(in_loop);
  EXPECT_FALSE(loop.InLoopThread());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(loop_thread, std::this_thread::get_id());
  EXPECT_EQ(loop.tasks_run(), 101u);
}

TEST(EventLoopTest, DestructorDrainsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    EventLoop loop;
    for (int i = 0; i < 50; ++i) loop.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(EventLoopTest, PeriodicTaskRunsBetweenPosts) {
  std::atomic<int> ticks{0};
  EventLoop loop([&] { ++ticks; }, absl::Milliseconds(1));
  // Observe progress through the loop itself rather than wall-clock sleeps.
  for (int i = 0; i < 1000 && ticks.load() < 3; ++i) {
    loop.RunSync([] {});
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GE(ticks.load(), 3);
}

// The burst task runs once after the tasks that were queued together (a group commit covers them
// all), at the latest after kMaxBurst of them, and before the loop waits or stops.
TEST(EventLoopTest, BurstTaskRunsAfterEachRunOfQueuedTasks) {
  std::vector<std::string> order;  // Loop thread only; read after the loop has stopped.
  absl::Notification release;
  const int n = EventLoop::kMaxBurst + 10;
  {
    EventLoop loop(nullptr, absl::Seconds(1), [&] { order.push_back("sync"); });
    loop.Post([&] { release.WaitForNotification(); });
    for (int i = 0; i < n; ++i) loop.Post([&, i] { order.push_back(std::to_string(i)); });
    loop.Post([&] { order.push_back("last"); });
    release.Notify();
  }  // Stopping drains the queue; the last burst still gets its sync.
  // The blocked first task and the next kMaxBurst - 1, a sync, the rest, a sync.
  std::vector<std::string> want;
  for (int i = 0; i < EventLoop::kMaxBurst - 1; ++i) want.push_back(std::to_string(i));
  want.push_back("sync");
  for (int i = EventLoop::kMaxBurst - 1; i < n; ++i) want.push_back(std::to_string(i));
  want.push_back("last");
  want.push_back("sync");
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace falcon::controller::service
