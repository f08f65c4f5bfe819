#include "common/testing/multiprocess.h"

#include <unistd.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace falcon::common::testing {
namespace {

TEST(MultiprocessTest, EachRankRunsInItsOwnProcessAndReportsItsExitCode) {
  const pid_t parent = getpid();
  std::vector<RankExit> exits =
      RunRanks(3, [parent](int rank) { return getpid() == parent ? 99 : rank; });
  ASSERT_EQ(exits.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(exits[r].rank, r);
    EXPECT_TRUE(exits[r].exited);
    EXPECT_EQ(exits[r].code, r);
  }
  EXPECT_TRUE(exits[0].ok());
  EXPECT_FALSE(exits[1].ok());
  EXPECT_EQ(Describe(exits), "rank 0 ok; rank 1 exit 1; rank 2 exit 2");
}

TEST(MultiprocessTest, StatusBodyExitsOneOnError) {
  std::vector<RankExit> exits = RunRanksStatus(
      2, [](int rank) { return rank == 0 ? absl::OkStatus() : absl::InternalError("boom"); });
  EXPECT_TRUE(exits[0].ok());
  EXPECT_TRUE(exits[1].exited);
  EXPECT_EQ(exits[1].code, 1);
}

TEST(MultiprocessTest, RanksPastTheTimeoutAreKilled) {
  std::vector<RankExit> exits = RunRanks(
      2,
      [](int rank) {
        if (rank == 1) pause();
        return 0;
      },
      absl::Milliseconds(300));
  EXPECT_TRUE(exits[0].ok());
  EXPECT_FALSE(exits[1].exited);
  EXPECT_TRUE(exits[1].timed_out);
  EXPECT_EQ(exits[1].signal, 9);
  EXPECT_EQ(Describe(exits), "rank 0 ok; rank 1 signal 9 (timed out)");
}

TEST(MultiprocessTest, FreshDirIsNewAndEmpty) {
  const std::string a = FreshDir("x");
  const std::string b = FreshDir("x");
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a, b);
  EXPECT_EQ(access(a.c_str(), W_OK), 0);
}

}  // namespace
}  // namespace falcon::common::testing
