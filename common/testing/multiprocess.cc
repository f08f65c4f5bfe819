#include "common/testing/multiprocess.h"

#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"

namespace falcon::common::testing {

std::vector<RankExit> RunRanks(int n, const std::function<int(int rank)>& body,
                               absl::Duration timeout) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<std::optional<common::Subprocess>> ranks(n);
  std::vector<RankExit> exits(n);
  auto record = [&](int r, const common::ExitStatus& e) {
    exits[r].exited = e.exited();
    exits[r].code = e.exited() ? e.code() : -1;
    exits[r].signal = e.signal();
  };
  for (int r = 0; r < n; ++r) {
    exits[r].rank = r;
    common::SpawnOptions options;
    options.name = absl::StrCat("rank ", r);
    options.parent_death_signal = SIGKILL;
    absl::StatusOr<common::Subprocess> child =
        common::Subprocess::SpawnFunction(options, [&body, r] {
          const int code = body(r);
          std::fflush(stdout);
          std::fflush(stderr);
          return code;
        });
    if (!child.ok()) {
      std::fprintf(stderr, "%s\n", child.status().ToString().c_str());
      record(r, common::ExitStatus::Exited(125));
      continue;
    }
    ranks[r] = std::move(*child);
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int left = 0;
    for (int r = 0; r < n; ++r) {
      if (!ranks[r].has_value()) continue;
      absl::StatusOr<std::optional<common::ExitStatus>> ended = ranks[r]->Poll();
      if (!ended.ok()) {
        std::fprintf(stderr, "%s\n", ended.status().ToString().c_str());
        ended = std::optional<common::ExitStatus>(common::ExitStatus::Exited(125));
      }
      if (ended->has_value()) {
        record(r, **ended);
        ranks[r].reset();
      } else {
        ++left;
      }
    }
    if (left == 0) break;
    if (absl::Now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (!ranks[r].has_value()) continue;
        ranks[r].reset();  // SIGKILLed and reaped.
        exits[r].timed_out = true;
        exits[r].signal = SIGKILL;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return exits;
}

std::vector<RankExit> RunRanksStatus(int n, const std::function<absl::Status(int rank)>& body,
                                     absl::Duration timeout) {
  return RunRanks(
      n,
      [&body](int r) {
        const absl::Status s = body(r);
        if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
        return s.ok() ? 0 : 1;
      },
      timeout);
}

std::string FreshDir(absl::string_view tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(base != nullptr ? base : "/tmp", "/", tag, ".XXXXXX");
  if (mkdtemp(path.data()) == nullptr) return "";
  return path;
}

std::string Describe(const std::vector<RankExit>& exits) {
  std::vector<std::string> parts;
  for (const RankExit& e : exits) {
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

}  // namespace falcon::common::testing
