#include "collective/fault/contention.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/testing/skip.h"

namespace falcon::collective::fault {
namespace {

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

// The process's executable name from /proc, "" when gone.
std::string Comm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(ContentionTest, RunsStressNgOnlyInsideTheWindow) {
  FALCON_REQUIRE_EXECUTABLE(ContentionOptions().stress_ng_path, "Debian package stress-ng");
  ContentionFault f;
  f.rank = 1;
  f.workers = 1;
  f.cpus = {0};
  f.window = {10, 12};
  ContentionController mine({f}, 1);
  ContentionController other({f}, 0);
  EXPECT_TRUE(mine.has_faults());
  EXPECT_FALSE(other.has_faults());
  ASSERT_TRUE(mine.OnIteration(9).ok());
  EXPECT_TRUE(mine.running_pids().empty());
  ASSERT_TRUE(mine.OnIteration(10).ok());
  ASSERT_EQ(mine.running_pids().size(), 1u);
  const pid_t pid = mine.running_pids()[0];
  EXPECT_TRUE(Alive(pid));
  ASSERT_TRUE(mine.OnIteration(11).ok());  // Still inside: same process.
  EXPECT_EQ(mine.running_pids(), std::vector<pid_t>{pid});
  ASSERT_TRUE(mine.OnIteration(12).ok());  // Window over: stopped and reaped.
  EXPECT_TRUE(mine.running_pids().empty());
  EXPECT_FALSE(Alive(pid));
  ASSERT_TRUE(other.OnIteration(10).ok());
  EXPECT_TRUE(other.running_pids().empty());
}

TEST(ContentionTest, DestructorStopsStressors) {
  FALCON_REQUIRE_EXECUTABLE(ContentionOptions().stress_ng_path, "Debian package stress-ng");
  ContentionFault f;
  f.cpus = {0};
  pid_t pid = 0;
  {
    ContentionController c({f}, 0);
    ASSERT_TRUE(c.OnIteration(0).ok());
    pid = c.running_pids().at(0);
    // Give exec a moment so we see stress-ng itself, not the forked child.
    for (int i = 0; i < 200 && Comm(pid) != "stress-ng"; ++i) usleep(5000);
    EXPECT_EQ(Comm(pid), "stress-ng");
  }
  EXPECT_FALSE(Alive(pid));
}

TEST(ContentionTest, MissingStressNgIsAClearError) {
  ContentionFault f;
  ContentionOptions o;
  o.stress_ng_path = "/nonexistent/stress-ng";
  ContentionController c({f}, 0, o);
  absl::Status s = c.OnIteration(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("stress-ng"), absl::string_view::npos);
}

TEST(ContentionTest, DefaultCpusAreTheProcessAffinity) {
  ContentionFault f;
  EXPECT_FALSE(ContentionController::TargetCpus(f).empty());
  f.cpus = {1, 3};
  EXPECT_EQ(ContentionController::TargetCpus(f), (std::vector<int>{1, 3}));
}

}  // namespace
}  // namespace falcon::collective::fault
