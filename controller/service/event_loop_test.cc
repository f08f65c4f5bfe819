#include "controller/service/event_loop.h"

#include <atomic>
#include <vector>

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

}  // namespace
}  // namespace falcon::controller::service
