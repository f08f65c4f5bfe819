// Test helper: runs one body per rank in forked child processes (real processes, real sockets)
// and reports how each ended. Children die with the parent (PR_SET_PDEATHSIG) and are killed when
// the timeout passes. Call from a single-threaded test process (fork).
#ifndef FALCON_TRAINER_TESTING_MULTIRANK_H_
#define FALCON_TRAINER_TESTING_MULTIRANK_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace falcon::trainer::testing {

struct RankExit {
  int rank = 0;
  bool exited = false;  // Normal exit with `code`; otherwise killed by `signal`.
  int code = -1;
  int signal = 0;
  bool timed_out = false;
  bool ok() const { return exited && code == 0; }
};

// Child r runs body(r) and exits with its return value (an exit code; print errors to stderr).
std::vector<RankExit> RunRanks(int n, const std::function<int(int rank)>& body,
                               absl::Duration timeout);

// A fresh empty directory under $TEST_TMPDIR (or /tmp).
std::string FreshDir(const std::string& tag);

// "rank 0 exit 0; rank 1 signal 9 (timed out)".
std::string Describe(const std::vector<RankExit>& exits);

}  // namespace falcon::trainer::testing

#endif  // FALCON_TRAINER_TESTING_MULTIRANK_H_
