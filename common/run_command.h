// Running a short command to its end and capturing what it printed: for tools Falcon drives from
// outside (iproute2's `ip`, `tc`), whose stderr is the only explanation of a failure and belongs in
// the error message.
//
// Shapes:
//   CommandOptions  argv (argv[0]: a path, or a name looked up in PATH), timeout (the child is
//                   SIGKILLed past it), max_output_bytes (per stream; the rest is read and dropped,
//                   so a chatty child never blocks on a full pipe).
//   CommandResult   the exit status and the captured stdout and stderr.
//
// Errors: those of common::Subprocess::Spawn (kNotFound for a missing program, ...);
// kDeadlineExceeded "`ARGV` did not finish within T (killed)" when it ran past the timeout;
// kInternal for a failed poll/read. A command that ran and failed is not an error: its exit status
// is in the result, and CommandFailure() turns it into one.
//
// Thread-compatible; the child gets stdin /dev/null and dies with the calling thread
// (PR_SET_PDEATHSIG SIGKILL).
#ifndef FALCON_COMMON_RUN_COMMAND_H_
#define FALCON_COMMON_RUN_COMMAND_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace falcon::common {

struct CommandOptions {
  std::vector<std::string> argv;
  absl::Duration timeout = absl::Seconds(30);
  size_t max_output_bytes = size_t{1} << 20;
};

struct CommandResult {
  ExitStatus status = ExitStatus::Exited(0);
  std::string stdout_text;
  std::string stderr_text;
};

absl::StatusOr<CommandResult> RunCommand(const CommandOptions& options);

// The argv as a shell would show it: words joined by spaces, a word with characters other than
// [A-Za-z0-9_./:=@%+,-] single-quoted ("ip -n fn1a2bg-node0 addr add 10.77.3.1/24 dev eth0").
std::string CommandLine(const std::vector<std::string>& argv);

// kInternal "`ARGV` EXIT_STATUS: STDERR" (stderr trimmed; stdout when stderr is empty), e.g.
// "`ip link add x type bridge` exited with code 2: RTNETLINK answers: Operation not permitted".
absl::Status CommandFailure(const std::vector<std::string>& argv, const CommandResult& result);

}  // namespace falcon::common

#endif  // FALCON_COMMON_RUN_COMMAND_H_
