// The real falconctl binary on bad command lines: each is refused before any call (exit 2), with
// a message naming the argument. No controller is needed: a refused line never dials one, and
// the address given (port 1, where nothing listens) would make a call that got through fail
// with exit 3 instead.
#include <cstdlib>
#include <string>
#include <vector>

#include "common/testing/run_binary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cli {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::vector<std::string> args;
  std::string message;
};

common::testing::BinaryRun RunFalconctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      std::string(std::getenv("TEST_SRCDIR")) + "/falcon/cli/falconctl", "--timeout", "2s"};
  argv.insert(argv.end(), args.begin(), args.end());
  common::testing::RunOptions options;
  options.env = std::vector<std::string>{};  // No FALCON_CONTROLLER from the environment.
  absl::StatusOr<common::testing::BinaryRun> run = common::testing::RunBinary(argv, options);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : common::testing::BinaryRun{};
}

TEST(FalconctlArgsTest, BadArgumentsExitTwoNamingTheArgument) {
  const std::vector<Case> cases = {
      // Port 99999 reached port 34463 (99999 mod 65536) before the address was checked.
      {{"--controller", "127.0.0.1:99999", "jobs"},
       "falconctl: --controller: '127.0.0.1:99999': port '99999' is not in [1, 65535]"},
      {{"--controller", "a b:7070", "jobs"}, "host 'a b' is not a DNS name"},
      // --limit 4294967297 became 1.
      {{"--controller", "127.0.0.1:1", "events", "--limit", "4294967297"},
       "falconctl: --limit: '4294967297' is not an integer in [0, 4294967295]"},
      // Clamped to 2^64 - 1 and sent.
      {{"--controller", "127.0.0.1:1", "event", "99999999999999999999"},
       "'99999999999999999999' is not an integer in [0, 18446744073709551615]"},
      {{"--controller", "127.0.0.1:1", "export", "j", "--from", "99999999999999999999"},
       "--from: '99999999999999999999' is not an integer in [0, 9223372036854775807]"},
      // Sent with a protobuf error about invalid UTF-8.
      {{"--controller", "127.0.0.1:1", "job", "\xff"}, "JOB: '\\xff' is not a job name"},
      {{"--controller", "127.0.0.1:1", "--timeout", "1e400", "jobs"}, "--timeout: '1e400'"},
  };
  for (const Case& c : cases) {
    const common::testing::BinaryRun r = RunFalconctl(c.args);
    EXPECT_EQ(r.status, common::ExitStatus::Exited(2)) << c.args[1] << ": " << r.output();
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args[1];
  }
}

}  // namespace
}  // namespace falcon::cli
