#include "trainer/testing/multirank.h"

#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"

namespace falcon::trainer::testing {

std::vector<RankExit> RunRanks(int n, const std::function<int(int rank)>& body,
                               absl::Duration timeout) {
  std::vector<std::optional<common::Subprocess>> ranks(n);
  std::vector<RankExit> exits(n);
  auto record = [&](int r, const common::ExitStatus& e) {
    exits[r].exited = e.exited();
    exits[r].code = e.exited() ? e.code() : -1;
    exits[r].signal = e.signal();
  };
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; ++r) {
    exits[r].rank = r;
    common::SpawnOptions options;
    options.name = absl::StrCat("rank ", r);
    options.parent_death_signal = SIGKILL;
    absl::StatusOr<common::Subprocess> child =
        common::Subprocess::SpawnFunction(options, [&body, r] {
          const int code = body(r);
          fflush(stdout);
          fflush(stderr);
          return code;
        });
    if (!child.ok()) {
      fprintf(stderr, "%s\n", child.status().ToString().c_str());
      record(r, common::ExitStatus::Exited(125));
      continue;
    }
    ranks[r] = std::move(*child);
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int remaining = 0;
    for (int r = 0; r < n; ++r) {
      if (!ranks[r].has_value()) continue;
      absl::StatusOr<std::optional<common::ExitStatus>> ended = ranks[r]->Poll();
      if (!ended.ok()) {
        fprintf(stderr, "%s\n", ended.status().ToString().c_str());
        ended = std::optional<common::ExitStatus>(common::ExitStatus::Exited(125));
      }
      if (ended->has_value()) {
        record(r, **ended);
        ranks[r].reset();
      } else {
        ++remaining;
      }
    }
    if (remaining == 0) break;
    if (absl::Now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (!ranks[r].has_value()) continue;
        ranks[r].reset();  // SIGKILLed and reaped.
        exits[r].signal = SIGKILL;
        exits[r].timed_out = true;
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
