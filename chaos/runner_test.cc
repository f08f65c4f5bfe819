#include "chaos/runner.h"

#include <signal.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(RealRunnerTest, RunCapturesExitCodeAndBothStreams) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  absl::StatusOr<CommandResult> r = runner->Run({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
}

TEST(RealRunnerTest, LargeOutputOnBothStreamsDoesNotDeadlock) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  absl::StatusOr<CommandResult> r = runner->Run(
      {"sh", "-c",
       "head -c 300000 /dev/zero >&2; head -c 200000 /dev/zero; head -c 1 /dev/zero >&2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text.size(), 200000u);
  EXPECT_EQ(r->stderr_text.size(), 300001u);
}

TEST(RealRunnerTest, MissingProgramIsAnError) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  absl::StatusOr<CommandResult> r = runner->Run({"falcon-no-such-program"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST(RealRunnerTest, Files) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  const std::string dir = TempDir() + "/runner_files";
  ASSERT_TRUE(runner->MakeDir(dir).ok());
  EXPECT_TRUE(runner->Exists(dir));
  EXPECT_EQ(runner->MakeDir(dir).code(), absl::StatusCode::kAlreadyExists);
  // WriteFile does not create.
  const absl::Status missing = runner->WriteFile(dir + "/f", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("write " + dir + "/f"));
  ASSERT_TRUE(runner->Run({"touch", dir + "/f"}).ok());
  ASSERT_TRUE(runner->WriteFile(dir + "/f", "hello").ok());
  absl::StatusOr<std::string> text = runner->ReadFile(dir + "/f");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  absl::StatusOr<std::vector<std::string>> names = runner->ListDir(dir);
  ASSERT_TRUE(names.ok());
  EXPECT_THAT(*names, ElementsAre("f"));
  EXPECT_FALSE(runner->RemoveDir(dir).ok());  // Not empty.
  ASSERT_TRUE(runner->Run({"rm", dir + "/f"}).ok());
  EXPECT_TRUE(runner->RemoveDir(dir).ok());
  EXPECT_FALSE(runner->Exists(dir));
  EXPECT_EQ(runner->ReadFile(dir + "/f").status().code(), absl::StatusCode::kNotFound);
}

TEST(RealRunnerTest, SpawnAndStop) {
  std::unique_ptr<Runner> runner = NewRealRunner();
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> p = runner->Spawn({"sleep", "600"});
  ASSERT_TRUE(p.ok()) << p.status();
  const int pid = (*p)->pid();
  EXPECT_EQ(kill(pid, 0), 0);
  EXPECT_TRUE((*p)->Stop().ok());
  EXPECT_NE(kill(pid, 0), 0);      // Reaped: gone.
  EXPECT_TRUE((*p)->Stop().ok());  // Again: a no-op.
}

}  // namespace
}  // namespace falcon::chaos
