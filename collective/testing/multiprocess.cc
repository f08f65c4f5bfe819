#include "collective/testing/multiprocess.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace falcon::collective::testing {

std::vector<ChildExit> RunRanks(int n, const std::function<absl::Status(int rank)>& body,
                                absl::Duration timeout) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(n, -1);
  std::vector<ChildExit> exits(n);
  const pid_t parent = getpid();
  for (int r = 0; r < n; ++r) {
    exits[r].rank = r;
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(125);
      absl::Status s = body(r);
      if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(s.ok() ? 0 : 1);
    }
    pids[r] = pid;
  }
  const absl::Time deadline = absl::Now() + timeout;
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      const pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        exits[r].exited = WIFEXITED(status);
        exits[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        exits[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        pids[r] = -1;
        --left;
      }
    }
    if (left == 0) break;
    if (absl::Now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        exits[r].timed_out = true;
        exits[r].signal = SIGKILL;
        pids[r] = -1;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return exits;
}

std::string FreshDir(absl::string_view tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(base != nullptr ? base : "/tmp", "/", tag, ".XXXXXX");
  if (mkdtemp(path.data()) == nullptr) return "";
  return path;
}

std::string Describe(const std::vector<ChildExit>& exits) {
  std::vector<std::string> parts;
  for (const ChildExit& e : exits) {
    if (e.ok()) {
      parts.push_back(absl::StrCat("rank ", e.rank, " ok"));
    } else if (e.exited) {
      parts.push_back(absl::StrCat("rank ", e.rank, " exit ", e.code));
    } else {
      parts.push_back(
          absl::StrCat("rank ", e.rank, " signal ", e.signal, e.timed_out ? " (timed out)" : ""));
    }
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace falcon::collective::testing
