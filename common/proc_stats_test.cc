#include "common/proc_stats.h"

#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(ProcStatsTest, OwnCpuAndMemoryGrowWithWork) {
  const absl::StatusOr<double> cpu0 = ProcessCpuSeconds(kSelf);
  ASSERT_TRUE(cpu0.ok()) << cpu0.status();
  volatile double x = 0;
  for (int i = 0; i < 200'000'000; ++i) x = x + 1e-9 * i;  // Well over one clock tick.
  const absl::StatusOr<double> cpu1 = ProcessCpuSeconds(getpid());
  ASSERT_TRUE(cpu1.ok()) << cpu1.status();
  EXPECT_GT(*cpu1, *cpu0);

  const absl::StatusOr<int64_t> rss0 = ResidentBytes(kSelf);
  ASSERT_TRUE(rss0.ok()) << rss0.status();
  std::vector<char> block(64 << 20, 1);  // Touched: resident.
  const absl::StatusOr<int64_t> rss1 = ResidentBytes(kSelf);
  ASSERT_TRUE(rss1.ok());
  EXPECT_GE(*rss1 - *rss0, 48 << 20);
  const absl::StatusOr<int64_t> peak = PeakResidentBytes(kSelf);
  ASSERT_TRUE(peak.ok());
  EXPECT_GE(*peak, *rss1);
  EXPECT_EQ(block[12345], 1);
}

TEST(ProcStatsTest, AProcessThatDoesNotExistIsNotFound) {
  // Beyond pid_max (at most 2^22 on Linux).
  EXPECT_EQ(ProcessCpuSeconds(1 << 23).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResidentBytes(1 << 23).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace falcon::common
