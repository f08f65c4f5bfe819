#include "trainer/testing/multirank.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace falcon::trainer::testing {

std::vector<RankExit> RunRanks(int n, const std::function<int(int rank)>& body,
                               absl::Duration timeout) {
  std::vector<pid_t> pids(n, -1);
  std::vector<RankExit> exits(n);
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; ++r) {
    exits[r].rank = r;
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int code = body(r);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  const absl::Time deadline = absl::Now() + timeout;
  int remaining = n;
  while (remaining > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      const pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      exits[r].exited = WIFEXITED(status);
      exits[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      exits[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      pids[r] = -1;
      --remaining;
    }
    if (remaining == 0) break;
    if (absl::Now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        exits[r].signal = SIGKILL;
        exits[r].timed_out = true;
        pids[r] = -1;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return exits;
}

std::string FreshDir(const std::string& tag) {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(base != nullptr ? base : "/tmp", "/", tag, ".XXXXXX");
  char* made = mkdtemp(templ.data());
  return made != nullptr ? std::string(made) : std::string();
}

std::string Describe(const std::vector<RankExit>& exits) {
  std::string out;
  for (const RankExit& e : exits) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", "rank ", e.rank, " ");
    if (e.exited) {
      absl::StrAppend(&out, "exit ", e.code);
    } else {
      absl::StrAppend(&out, "signal ", e.signal, e.timed_out ? " (timed out)" : "");
    }
  }
  return out;
}

}  // namespace falcon::trainer::testing
