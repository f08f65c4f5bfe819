#include "chaos/proc_threads.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::chaos {
namespace {

std::string TaskPath(int pid, int tid, absl::string_view file) {
  return absl::StrCat("/proc/", pid, "/task/", tid, "/", file);
}

}  // namespace

absl::StatusOr<std::vector<ProcThread>> ListThreads(Runner* runner, int pid) {
  absl::StatusOr<std::vector<std::string>> names =
      runner->ListDir(absl::StrCat("/proc/", pid, "/task"));
  if (!names.ok()) {
    return absl::NotFoundError(
        absl::StrCat("process ", pid, " does not exist (", names.status().message(), ")"));
  }
  std::vector<ProcThread> out;
  for (const std::string& entry : *names) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry, &tid)) continue;
    absl::StatusOr<std::string> comm = runner->ReadFile(TaskPath(pid, tid, "comm"));
    if (!comm.ok()) continue;  // Ended meanwhile.
    out.push_back({tid, std::string(absl::StripTrailingAsciiWhitespace(*comm))});
  }
  std::sort(out.begin(), out.end(),
            [](const ProcThread& a, const ProcThread& b) { return a.tid < b.tid; });
  return out;
}

absl::StatusOr<std::vector<int>> ThreadsNamed(Runner* runner, int pid, absl::string_view name) {
  absl::StatusOr<std::vector<ProcThread>> threads = ListThreads(runner, pid);
  if (!threads.ok()) return threads.status();
  std::vector<int> tids;
  for (const ProcThread& t : *threads) {
    if (t.name == name) tids.push_back(t.tid);
  }
  if (tids.empty()) {
    return absl::NotFoundError(
        absl::StrCat("process ", pid, " has no thread named '", name, "' (its threads: ",
                     absl::StrJoin(*threads, ", ",
                                   [](std::string* out, const ProcThread& t) {
                                     absl::StrAppend(out, "'", t.name, "' (TID ", t.tid, ")");
                                   }),
                     ")"));
  }
  return tids;
}

absl::StatusOr<int64_t> ProcStatField(Runner* runner, const std::string& stat_path, int index,
                                      const char* name) {
  absl::StatusOr<std::string> stat = runner->ReadFile(stat_path);
  if (!stat.ok()) return stat.status();
  // "PID (COMM) STATE PPID ...": fields after the command's ')' from STATE (index 0) on.
  const size_t paren = stat->rfind(')');
  std::vector<absl::string_view> fields;
  if (paren != std::string::npos) {
    fields = absl::StrSplit(absl::string_view(*stat).substr(paren + 1), ' ', absl::SkipEmpty());
  }
  int64_t value = 0;
  if (static_cast<int>(fields.size()) <= index ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(fields[index]), &value)) {
    return absl::InternalError(absl::StrCat(stat_path, ": no ", name, " in '", *stat, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> ThreadCpuNanos(Runner* runner, int pid, int tid,
                                       int64_t clock_ticks_per_second) {
  const std::string schedstat = TaskPath(pid, tid, "schedstat");
  if (runner->Exists(schedstat)) {
    absl::StatusOr<std::string> text = runner->ReadFile(schedstat);
    if (!text.ok()) return text.status();
    std::vector<absl::string_view> f =
        absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    int64_t ns = 0;
    if (f.empty() || !absl::SimpleAtoi(f[0], &ns)) {
      return absl::InternalError(absl::StrCat(schedstat, ": no CPU time in '", *text, "'"));
    }
    return ns;
  }
  const std::string stat = TaskPath(pid, tid, "stat");
  if (!runner->Exists(stat)) {
    return absl::NotFoundError(absl::StrCat("thread ", tid, " of process ", pid, " has ended"));
  }
  absl::StatusOr<int64_t> utime = ProcStatField(runner, stat, 11, "utime");  // Field 14.
  if (!utime.ok()) return utime.status();
  absl::StatusOr<int64_t> stime = ProcStatField(runner, stat, 12, "stime");  // Field 15.
  if (!stime.ok()) return stime.status();
  return (*utime + *stime) * (1'000'000'000 / clock_ticks_per_second);
}

}  // namespace falcon::chaos
