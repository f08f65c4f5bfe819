#include "collective/ring/ring_collectives.h"

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "collective/ring/thread_transport.h"
#include "gtest/gtest.h"

namespace falcon::collective::ring {
namespace {

// Runs body(rank, transport) on one thread per rank; returns each rank's status.
std::vector<absl::Status> RunAll(ThreadTransportHub& hub, int n,
                                 const std::function<absl::Status(int, Transport&)>& body) {
  std::vector<absl::Status> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { out[r] = body(r, hub.endpoint(r)); });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Value contributed by rank r at index i: small integers so float sums are exact.
float Value(int r, size_t i) { return static_cast<float>((r + 1) * 3 + static_cast<int>(i % 17)); }

class RingTest : public ::testing::TestWithParam<int> {};

TEST_P(RingTest, AllReduceSumAndMaxAnyCount) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{1003}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      ThreadTransportHub hub(n);
      std::vector<std::vector<float>> out(n, std::vector<float>(count, -1.0f));
      auto statuses = RunAll(hub, n, [&](int r, Transport& t) {
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = Value(r, i);
        std::vector<uint8_t> scratch;
        return RingAllReduce(t, in.data(), out[r].data(), count, DataType::kFloat32, op, &scratch);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << statuses[r];
        for (size_t i = 0; i < count; ++i) {
          float want = op == ReduceOp::kSum ? 0.0f : Value(0, i);
          for (int k = 0; k < n; ++k) {
            want = op == ReduceOp::kSum ? want + Value(k, i) : std::max(want, Value(k, i));
          }
          ASSERT_EQ(out[r][i], want)
              << "n=" << n << " count=" << count << " rank=" << r << " i=" << i;
        }
      }
    }
  }
}

TEST_P(RingTest, AllReduceInPlaceUsesOnlyRingLinks) {
  const int n = GetParam();
  const size_t count = 64 * static_cast<size_t>(n) + 3;
  ThreadTransportHub hub(n);
  std::vector<std::vector<int64_t>> buf(n, std::vector<int64_t>(count));
  auto statuses = RunAll(hub, n, [&](int r, Transport& t) {
    for (size_t i = 0; i < count; ++i) buf[r][i] = r * 1000 + static_cast<int64_t>(i);
    std::vector<uint8_t> scratch;
    return RingAllReduce(t, buf[r].data(), buf[r].data(), count, DataType::kInt64, ReduceOp::kSum,
                         &scratch);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(buf[r][i], 1000 * n * (n - 1) / 2 + n * static_cast<int64_t>(i));
    }
  }
  if (n < 2) return;
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      if (dst == (src + 1) % n) {
        // 2(n-1) steps, each moving one chunk: everything but one chunk, twice.
        EXPECT_GT(hub.bytes_sent(src, dst), 0u);
        EXPECT_LE(hub.bytes_sent(src, dst), 2 * count * sizeof(int64_t));
      } else if (src != dst) {
        EXPECT_EQ(hub.bytes_sent(src, dst), 0u) << src << "->" << dst;
      }
    }
  }
}

TEST_P(RingTest, AllGatherConcatenatesInRankOrder) {
  const int n = GetParam();
  for (size_t per : {size_t{1}, size_t{5}, size_t{1001}}) {
    ThreadTransportHub hub(n);
    std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(per * n, -1));
    auto statuses = RunAll(hub, n, [&](int r, Transport& t) {
      std::vector<int32_t> in(per);
      for (size_t i = 0; i < per; ++i) in[i] = r * 100000 + static_cast<int32_t>(i);
      return RingAllGather(t, in.data(), out[r].data(), per * sizeof(int32_t));
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      for (int k = 0; k < n; ++k) {
        for (size_t i = 0; i < per; ++i) {
          ASSERT_EQ(out[r][k * per + i], k * 100000 + static_cast<int32_t>(i));
        }
      }
    }
  }
}

TEST_P(RingTest, ReduceScatterGivesEachRankItsBlock) {
  const int n = GetParam();
  for (size_t per : {size_t{1}, size_t{3}, size_t{517}}) {
    ThreadTransportHub hub(n);
    std::vector<std::vector<double>> out(n, std::vector<double>(per, -1));
    auto statuses = RunAll(hub, n, [&](int r, Transport& t) {
      std::vector<double> in(per * n);
      for (size_t i = 0; i < in.size(); ++i) in[i] = (r + 1) * 0.5 + static_cast<double>(i);
      std::vector<uint8_t> scratch;
      return RingReduceScatter(t, in.data(), out[r].data(), per, DataType::kFloat64, ReduceOp::kSum,
                               &scratch);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      for (size_t i = 0; i < per; ++i) {
        const double idx = static_cast<double>(r * per + i);
        ASSERT_DOUBLE_EQ(out[r][i], 0.5 * n * (n + 1) / 2 + n * idx);
      }
    }
  }
}

TEST_P(RingTest, BroadcastFromEveryRoot) {
  const int n = GetParam();
  for (int root = 0; root < n; ++root) {
    ThreadTransportHub hub(n);
    std::vector<std::vector<uint8_t>> buf(n, std::vector<uint8_t>(333, 0));
    auto statuses = RunAll(hub, n, [&](int r, Transport& t) {
      if (r == root) {
        for (size_t i = 0; i < buf[r].size(); ++i) buf[r][i] = static_cast<uint8_t>(i + root);
      }
      return TreeBroadcast(t, buf[r].data(), buf[r].size(), root);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      ASSERT_EQ(buf[r], buf[root]) << "root " << root << " rank " << r;
    }
  }
}

TEST_P(RingTest, BarrierCompletesOnEveryRank) {
  const int n = GetParam();
  ThreadTransportHub hub(n);
  auto statuses = RunAll(hub, n, [](int, Transport& t) { return DisseminationBarrier(t); });
  for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(RingTest, BarrierWaitsForLateRank) {
  // Rank 2 never arrives: the others fail instead of passing the barrier.
  ThreadTransportHub hub(3, absl::Milliseconds(200));
  std::vector<absl::Status> out(2);
  std::thread a([&] { out[0] = DisseminationBarrier(hub.endpoint(0)); });
  std::thread b([&] { out[1] = DisseminationBarrier(hub.endpoint(1)); });
  a.join();
  b.join();
  EXPECT_FALSE(out[0].ok() && out[1].ok());
}

INSTANTIATE_TEST_SUITE_P(Sizes, RingTest, ::testing::Values(1, 2, 3, 4, 5, 8));

}  // namespace
}  // namespace falcon::collective::ring
