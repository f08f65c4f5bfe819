#include "common/run_command.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::HasSubstr;

TEST(RunCommandTest, CapturesBothStreamsAndTheExitCode) {
  CommandOptions o;
  o.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  absl::StatusOr<CommandResult> r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, ExitStatus::Exited(3));
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
}

TEST(RunCommandTest, LooksTheProgramUpInPath) {
  CommandOptions o;
  o.argv = {"true"};
  absl::StatusOr<CommandResult> r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->status.success());
}

TEST(RunCommandTest, MissingProgramIsNotFound) {
  CommandOptions o;
  o.argv = {"/nonexistent/falcon-no-such-program"};
  absl::StatusOr<CommandResult> r = RunCommand(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST(RunCommandTest, KeepsAtMostTheLimitButReadsEverything) {
  CommandOptions o;
  // 1 MiB on stdout, then a line on stderr: the child must not block on a full pipe.
  o.argv = {"/bin/sh", "-c", "head -c 1048576 /dev/zero; echo done >&2"};
  o.max_output_bytes = 100;
  absl::StatusOr<CommandResult> r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->status.success());
  EXPECT_EQ(r->stdout_text.size(), 100u);
  EXPECT_EQ(r->stderr_text, "done\n");
}

TEST(RunCommandTest, KillsAChildPastTheTimeout) {
  CommandOptions o;
  o.argv = {"/bin/sleep", "600"};
  o.timeout = absl::Milliseconds(100);
  absl::StatusOr<CommandResult> r = RunCommand(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("`/bin/sleep 600` did not finish within 100ms"));
}

TEST(CommandLineTest, QuotesWordsAShellWouldSplit) {
  EXPECT_EQ(CommandLine({"ip", "-n", "fn1ag-node0", "addr", "add", "10.77.3.1/24"}),
            "ip -n fn1ag-node0 addr add 10.77.3.1/24");
  EXPECT_EQ(CommandLine({"sh", "-c", "echo it's"}), "sh -c 'echo it'\\''s'");
  EXPECT_EQ(CommandLine({"a", ""}), "a ''");
}

TEST(CommandFailureTest, NamesTheCommandTheStatusAndStderr) {
  CommandResult r;
  r.status = ExitStatus::Exited(2);
  r.stderr_text = "RTNETLINK answers: Operation not permitted\n";
  absl::Status s = CommandFailure({"ip", "link", "add", "x", "type", "bridge"}, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "`ip link add x type bridge` exited with code 2: RTNETLINK answers: Operation not "
            "permitted");
  r.stderr_text.clear();
  EXPECT_THAT(CommandFailure({"x"}, r).message(), HasSubstr("(no output)"));
}

}  // namespace
}  // namespace falcon::common
