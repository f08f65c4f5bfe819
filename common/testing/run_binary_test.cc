#include "common/testing/run_binary.h"

#include <csignal>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace falcon::common::testing {
namespace {

TEST(RunBinaryTest, ExitStatusAndBothStreams) {
  absl::StatusOr<BinaryRun> run = RunBinary({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->status, common::ExitStatus::Exited(3));
  EXPECT_FALSE(run->timed_out);
  EXPECT_EQ(run->out, "out\n");
  EXPECT_EQ(run->err, "err\n");
  EXPECT_EQ(run->output(), "out\nerr\n");
}

TEST(RunBinaryTest, SignalAndTimeout) {
  absl::StatusOr<BinaryRun> aborted = RunBinary({"/bin/sh", "-c", "kill -ABRT $$"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(aborted->status, common::ExitStatus::Signaled(SIGABRT));
  RunOptions o;
  o.timeout = absl::Milliseconds(100);
  absl::StatusOr<BinaryRun> slow = RunBinary({"/bin/sleep", "30"}, o);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_TRUE(slow->timed_out);
  EXPECT_EQ(slow->status, common::ExitStatus::Signaled(SIGKILL));
}

TEST(RunBinaryTest, MissingProgramIsAnError) {
  EXPECT_FALSE(RunBinary({"/nonexistent/program"}).ok());
}

}  // namespace
}  // namespace falcon::common::testing
