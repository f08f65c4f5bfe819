#include "trainer_shim/spsc_ring.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

TEST(SpscRingTest, RoundsCapacityUpToPowerOfTwo) {
  EXPECT_EQ(SpscRing<int>(0).capacity(), 2u);
  EXPECT_EQ(SpscRing<int>(5).capacity(), 8u);
  EXPECT_EQ(SpscRing<int>(64).capacity(), 64u);
}

TEST(SpscRingTest, FifoFullAndEmpty) {
  SpscRing<int> ring(4);
  int out = 0;
  EXPECT_FALSE(ring.TryPop(&out));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.TryPush(i));
  EXPECT_FALSE(ring.TryPush(99)) << "a full ring refuses the push";
  EXPECT_EQ(ring.SizeApprox(), 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(ring.TryPop(&out));
    EXPECT_EQ(out, i);
  }
  EXPECT_FALSE(ring.TryPop(&out));
}

TEST(SpscRingTest, WrapsAroundManyTimes) {
  SpscRing<uint64_t> ring(8);
  uint64_t next_pop = 0;
  uint64_t next_push = 0;
  std::vector<uint64_t> buf(5);
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring.TryPush(next_push++));
    const size_t n = ring.PopBulk(buf.data(), buf.size());
    ASSERT_EQ(n, 5u);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(buf[i], next_pop++);
  }
}

TEST(SpscRingTest, PopBulkReturnsOnlyWhatIsThere) {
  SpscRing<int> ring(16);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring.TryPush(i));
  std::vector<int> buf(10, -1);
  EXPECT_EQ(ring.PopBulk(buf.data(), buf.size()), 3u);
  EXPECT_EQ(buf[2], 2);
  EXPECT_EQ(buf[3], -1);
}

struct Item {
  uint64_t value;
  uint64_t check;  // Torn copies would break value * 3 == check.
};

// One producer and one consumer hammer a small ring; every item arrives exactly once, in order,
// uncorrupted (a refused push is retried).
TEST(SpscRingTest, ConcurrentProducerConsumerKeepsOrderAndContent) {
  constexpr uint64_t kItems = 400'000;
  SpscRing<Item> ring(64);
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kItems; ++i) {
      while (!ring.TryPush(Item{i, i * 3})) {
        std::this_thread::yield();
      }
    }
  });
  uint64_t expected = 1;
  uint64_t sum = 0;
  std::vector<Item> buf(17);
  bool ok = true;
  while (expected <= kItems) {
    const size_t n = ring.PopBulk(buf.data(), buf.size());
    if (n == 0) std::this_thread::yield();
    for (size_t i = 0; i < n; ++i) {
      if (buf[i].value != expected || buf[i].check != expected * 3) ok = false;
      sum += buf[i].value;
      ++expected;
    }
  }
  producer.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(sum, kItems * (kItems + 1) / 2);
  EXPECT_EQ(ring.SizeApprox(), 0u);
}

// The shim's pattern: the producer never waits, so items are lost when the consumer lags; what
// arrives is exactly what was accepted, in order.
TEST(SpscRingTest, ConcurrentDropOnFullLosesNothingAccepted) {
  constexpr uint64_t kItems = 200'000;
  SpscRing<uint64_t> ring(32);
  std::vector<uint64_t> accepted;
  accepted.reserve(kItems);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kItems; ++i) {
      if (ring.TryPush(i)) accepted.push_back(i);
    }
    done.store(true);
  });
  std::vector<uint64_t> received;
  uint64_t v = 0;
  while (!done.load() || ring.SizeApprox() > 0) {
    if (ring.TryPop(&v)) {
      received.push_back(v);
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  while (ring.TryPop(&v)) received.push_back(v);
  EXPECT_EQ(received, accepted);
}

}  // namespace
}  // namespace falcon::trainer_shim
