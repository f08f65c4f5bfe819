#include "common/proc_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::common {
namespace {

std::string ProcPath(int pid, const char* file) {
  return pid == kSelf ? absl::StrCat("/proc/self/", file) : absl::StrCat("/proc/", pid, "/", file);
}

absl::StatusOr<std::string> ReadProcFile(int pid, const char* file) {
  const std::string path = ProcPath(pid, file);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read (no such process?)"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<int64_t> StatusKb(int pid, absl::string_view key) {
  absl::StatusOr<std::string> text = ReadProcFile(pid, "status");
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, "kB");
    int64_t kb = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) return kb;
  }
  return absl::NotFoundError(absl::StrCat(ProcPath(pid, "status"), ": no ", key, " line"));
}

}  // namespace

absl::StatusOr<double> ProcessCpuSeconds(int pid) {
  absl::StatusOr<std::string> stat = ReadProcFile(pid, "stat");
  if (!stat.ok()) return stat.status();
  // The command (field 2) may hold spaces and parentheses: the fields after it start after the
  // last ')'. There, state is field 3 of proc(5); utime and stime are fields 14 and 15.
  const size_t paren = stat->rfind(')');
  std::vector<std::string> f;
  if (paren != std::string::npos && paren + 2 < stat->size()) {
    f = absl::StrSplit(stat->substr(paren + 2), ' ');
  }
  double utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime)) {
    return absl::InternalError(absl::StrCat(ProcPath(pid, "stat"), ": unreadable stat line"));
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<int64_t> ResidentBytes(int pid) {
  absl::StatusOr<int64_t> kb = StatusKb(pid, "VmRSS");
  if (!kb.ok()) return kb.status();
  return *kb * 1024;
}

absl::StatusOr<int64_t> PeakResidentBytes(int pid) {
  absl::StatusOr<int64_t> kb = StatusKb(pid, "VmHWM");
  if (!kb.ok()) return kb.status();
  return *kb * 1024;
}

}  // namespace falcon::common
