// Running a program to completion in a test, through common::Subprocess: its exit status and
// what it wrote, for tests of Falcon's binaries (bad flags, bad input files, --help). A program
// that runs longer than the timeout is SIGKILLed (the result says so), so a regression that makes
// a binary hang or grow without bound fails the test instead of stalling it.
#ifndef FALCON_COMMON_TESTING_RUN_BINARY_H_
#define FALCON_COMMON_TESTING_RUN_BINARY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace falcon::common::testing {

struct BinaryRun {
  common::ExitStatus status = common::ExitStatus::Exited(-1);
  bool timed_out = false;  // Killed after the timeout.
  std::string out;         // stdout.
  std::string err;         // stderr.
  std::string output() const { return out + err; }
};

struct RunOptions {
  absl::Duration timeout = absl::Seconds(60);
  std::optional<std::vector<std::string>> env;  // "KEY=VALUE" each; nullopt: the test's own.
  std::string cwd;                              // "": the test's.
  std::string stdin_path;                       // "": /dev/null.
};

// Runs `argv` (argv[0] a path) to completion. Errors: the program cannot be started or waited for
// (common::Subprocess's errors), or its output cannot be stored ($TEST_TMPDIR, else /tmp).
absl::StatusOr<BinaryRun> RunBinary(const std::vector<std::string>& argv,
                                    const RunOptions& options = {});

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_RUN_BINARY_H_
