#include "chaos/proc_threads.h"

#include <string>
#include <vector>

#include "chaos/fake_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Process 42: its main thread "rank", "gloo" (43), two "falcon-device" threads (44, 46).
void SetUpThreads(FakeRunner& fake) {
  fake.SetFile("/proc/42/task/42/comm", "rank\n");
  fake.SetFile("/proc/42/task/43/comm", "gloo\n");
  fake.SetFile("/proc/42/task/44/comm", "falcon-device\n");
  fake.SetFile("/proc/42/task/46/comm", "falcon-device\n");
}

TEST(ProcThreadsTest, ListsThreadsByTid) {
  FakeRunner fake;
  SetUpThreads(fake);
  absl::StatusOr<std::vector<ProcThread>> threads = ListThreads(&fake, 42);
  ASSERT_TRUE(threads.ok()) << threads.status();
  ASSERT_EQ(threads->size(), 4u);
  EXPECT_EQ((*threads)[0].tid, 42);
  EXPECT_EQ((*threads)[0].name, "rank");
  EXPECT_EQ((*threads)[2].name, "falcon-device");
  EXPECT_EQ(ListThreads(&fake, 7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ListThreads(&fake, 7).status().message(), HasSubstr("process 7 does not exist"));
}

TEST(ProcThreadsTest, ThreadsNamedMatchExactly) {
  FakeRunner fake;
  SetUpThreads(fake);
  absl::StatusOr<std::vector<int>> tids = ThreadsNamed(&fake, 42, "falcon-device");
  ASSERT_TRUE(tids.ok()) << tids.status();
  EXPECT_THAT(*tids, ElementsAre(44, 46));
  absl::StatusOr<std::vector<int>> none = ThreadsNamed(&fake, 42, "falcon-dev");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(),
              HasSubstr("process 42 has no thread named 'falcon-dev' (its threads: 'rank' (TID "
                        "42), 'gloo' (TID 43), 'falcon-device' (TID 44), 'falcon-device' (TID "
                        "46))"));
}

TEST(ProcThreadsTest, CpuTimeFromSchedstatElseStat) {
  FakeRunner fake;
  SetUpThreads(fake);
  fake.SetFile("/proc/42/task/44/schedstat", "1234567890 555 12\n");
  absl::StatusOr<int64_t> ns = ThreadCpuNanos(&fake, 42, 44, 100);
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(*ns, 1234567890);
  // No schedstat: utime 30 + stime 12 ticks at 100 Hz.
  fake.SetFile("/proc/42/task/46/stat",
               "46 (falcon device) R 1 1 1 0 -1 4194304 0 0 0 0 30 12 0 0 20 0 1 0 100\n");
  ns = ThreadCpuNanos(&fake, 42, 46, 100);
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(*ns, 420'000'000);
  EXPECT_EQ(ThreadCpuNanos(&fake, 42, 43, 100).status().code(), absl::StatusCode::kNotFound);
  fake.SetFile("/proc/42/task/44/schedstat", "x\n");
  EXPECT_THAT(ThreadCpuNanos(&fake, 42, 44, 100).status().message(),
              HasSubstr("/proc/42/task/44/schedstat: no CPU time in 'x"));
}

}  // namespace
}  // namespace falcon::chaos
