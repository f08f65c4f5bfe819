// Test helper: runs one body per rank in forked child processes (real processes, real sockets),
// then reports how each child ended. Children die with the parent (PR_SET_PDEATHSIG) and are
// killed when the overall timeout passes. Call from a single-threaded test process (fork).
#ifndef FALCON_COLLECTIVE_TESTING_MULTIPROCESS_H_
#define FALCON_COLLECTIVE_TESTING_MULTIPROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::collective::testing {

struct ChildExit {
  int rank = 0;
  bool exited = false;  // Normal exit; `code` is the exit status.
  int code = -1;
  int signal = 0;          // Killing signal when !exited.
  bool timed_out = false;  // Killed by RunRanks because the timeout passed.
  bool ok() const { return exited && code == 0; }
};

// Forks `n` children; child r runs body(r) and exits 0 if it returns OK, else prints the status
// (prefixed "rank r:") to stderr and exits 1. Returns after every child ended.
std::vector<ChildExit> RunRanks(int n, const std::function<absl::Status(int rank)>& body,
                                absl::Duration timeout = absl::Seconds(60));

// A fresh, empty directory under $TEST_TMPDIR (or /tmp) for a rendezvous store.
std::string FreshDir(absl::string_view tag);

// "rank 0 ok; rank 1 exit 1; rank 2 signal 9 (timed out)" for assertion messages.
std::string Describe(const std::vector<ChildExit>& exits);

}  // namespace falcon::collective::testing

#endif  // FALCON_COLLECTIVE_TESTING_MULTIPROCESS_H_
