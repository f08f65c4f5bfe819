#include "collective/pause_gate.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace falcon::collective {
namespace {

TEST(PauseGateTest, NotPausedPassesAtOnce) {
  PauseGate gate;
  EXPECT_FALSE(gate.paused());
  gate.WaitIfPaused();
  EXPECT_EQ(gate.held_count(), 0);
}

TEST(PauseGateTest, HoldsUntilResume) {
  PauseGate gate;
  gate.Pause();
  std::atomic<bool> passed{false};
  std::thread op([&] {
    gate.WaitIfPaused();
    passed = true;
  });
  ASSERT_TRUE(gate.AwaitHeld(1, absl::Seconds(10)));
  EXPECT_FALSE(passed.load());
  EXPECT_EQ(gate.held_count(), 1);
  gate.Resume();
  op.join();
  EXPECT_TRUE(passed.load());
  EXPECT_EQ(gate.held_count(), 0);
  EXPECT_EQ(gate.auto_releases(), 0);
}

TEST(PauseGateTest, BypassThreadPassesWhileOthersAreHeld) {
  PauseGate gate;
  gate.Pause();
  std::thread held([&] { gate.WaitIfPaused(); });
  ASSERT_TRUE(gate.AwaitHeld(1, absl::Seconds(10)));
  {
    PauseGate::ScopedBypass bypass(&gate);
    gate.WaitIfPaused();  // Returns: this thread is allowed through.
  }
  EXPECT_EQ(gate.held_count(), 1);
  gate.Resume();
  held.join();
}

TEST(PauseGateTest, MaxHoldReleasesByItself) {
  PauseGate gate;
  gate.Pause(absl::Milliseconds(20));
  gate.WaitIfPaused();  // Would block forever without the max hold.
  EXPECT_FALSE(gate.paused());
  EXPECT_EQ(gate.auto_releases(), 1);
}

TEST(PauseGateTest, AwaitHeldFailsWhenNobodyArrives) {
  PauseGate gate;
  gate.Pause();
  EXPECT_FALSE(gate.AwaitHeld(1, absl::Milliseconds(10)));
  gate.Resume();
  EXPECT_FALSE(gate.AwaitHeld(1, absl::Seconds(10)));  // Not paused: returns at once.
}

}  // namespace
}  // namespace falcon::collective
