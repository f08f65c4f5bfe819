// Test helper: runs one body per rank in forked child processes (real processes, real sockets)
// and reports how each child ended. Children die with the parent (PR_SET_PDEATHSIG) and are
// SIGKILLed when the timeout passes. Call from a single-threaded test process (fork).
#ifndef FALCON_COMMON_TESTING_MULTIPROCESS_H_
#define FALCON_COMMON_TESTING_MULTIPROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::common::testing {

// How one rank's child ended.
struct RankExit {
  int rank = 0;
  bool exited = false;  // Normal exit with `code`; otherwise killed by `signal`.
  int code = -1;
  int signal = 0;
  bool timed_out = false;  // Killed because the timeout passed.
  bool ok() const { return exited && code == 0; }
};

// Forks `n` children; child r runs body(r) and exits with its return value (an exit code; the
// body prints its own errors). Returns after every child ended or was killed at `timeout`.
std::vector<RankExit> RunRanks(int n, const std::function<int(int rank)>& body,
                               absl::Duration timeout = absl::Seconds(60));

// As RunRanks, for a body that returns a Status: the child exits 0 when it is OK, else prints it
// (prefixed "rank r:") to stderr and exits 1.
std::vector<RankExit> RunRanksStatus(int n, const std::function<absl::Status(int rank)>& body,
                                     absl::Duration timeout = absl::Seconds(60));

// A fresh, empty directory under $TEST_TMPDIR (or /tmp) named after `tag`; "" on failure.
std::string FreshDir(absl::string_view tag);

// "rank 0 ok; rank 1 exit 1; rank 2 signal 9 (timed out)" for assertion messages.
std::string Describe(const std::vector<RankExit>& exits);

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_MULTIPROCESS_H_
