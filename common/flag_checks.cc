#include "common/flag_checks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {
namespace {

constexpr size_t kPathMax = 4096;   // Linux PATH_MAX, including the terminating NUL.
constexpr size_t kShownBytes = 64;  // Of a bad value in a message.

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(field.empty() ? std::string(what)
                                                  : absl::StrCat(field, ": ", what));
}

// `text` as shown in a message: C-escaped, at most `limit` bytes of it.
std::string Shown(absl::string_view text, size_t limit = kShownBytes) {
  std::string s = absl::CHexEscape(text.substr(0, limit));
  if (text.size() > limit) s += "...";
  return s;
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text, absl::string_view field) {
  const std::string t(absl::StripAsciiWhitespace(text));
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(t, &seconds)) {
    if (!std::isfinite(seconds)) {
      return Bad(field, absl::StrCat("'", Shown(t), "' is not a finite duration"));
    }
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(t, &d)) {
    return Bad(field,
               absl::StrCat("'", Shown(t), "' is not a duration (e.g. 1.5s, 500ms, 10m or 2.5)"));
  }
  if (d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return Bad(field, absl::StrCat("'", Shown(t), "' is not a finite duration"));
  }
  return d;
}

absl::Status CheckDurationIn(absl::Duration d, absl::string_view field, absl::Duration min,
                             absl::Duration max) {
  if (d >= min && d <= max && d != absl::InfiniteDuration() && d != -absl::InfiniteDuration()) {
    return absl::OkStatus();
  }
  return Bad(field, absl::StrCat(absl::FormatDuration(d), " is not in [", absl::FormatDuration(min),
                                 ", ", absl::FormatDuration(max), "]"));
}

absl::Status CheckIntegerIn(int64_t v, absl::string_view field, int64_t min, int64_t max) {
  if (v >= min && v <= max) return absl::OkStatus();
  return Bad(field, absl::StrCat(v, " is not in [", min, ", ", max, "]"));
}

absl::Status CheckNumberIn(double v, absl::string_view field, double min, double max) {
  if (std::isfinite(v) && v >= min && v <= max) return absl::OkStatus();
  return Bad(field, absl::StrCat(v, " is not a number in [", min, ", ", max, "]"));
}

absl::StatusOr<uint64_t> ParseCount(absl::string_view text, absl::string_view field, uint64_t max) {
  uint64_t v = 0;
  if (text.empty() || !std::all_of(text.begin(), text.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(text, &v) || v > max) {
    return Bad(field, absl::StrCat("'", Shown(text), "' is not an integer in [0, ", max, "]"));
  }
  return v;
}

absl::Status CheckPath(absl::string_view path, absl::string_view field) {
  if (path.empty()) return Bad(field, "must not be empty");
  if (path.size() >= kPathMax) {
    return Bad(field,
               absl::StrCat("path of ", path.size(), " bytes is longer than ", kPathMax - 1));
  }
  if (path.find('\0') != absl::string_view::npos) return Bad(field, "path contains a NUL byte");
  return absl::OkStatus();
}

absl::Status CheckDirectoryPath(const std::string& path, absl::string_view field) {
  if (absl::Status s = CheckPath(path, field); !s.ok()) return s;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return Bad(field, absl::StrCat("'", Shown(path, kPathMax), "' exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status CheckNoPositionals(const std::vector<char*>& positional) {
  if (positional.size() <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", Shown(positional[1]),
                                                 "' (this program takes flags only; see --help)"));
}

absl::Status CheckIntegersIn(std::initializer_list<IntegerRange> ranges) {
  for (const IntegerRange& r : ranges) {
    if (absl::Status s = CheckIntegerIn(r.value, r.field, r.min, r.max); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckDurationsIn(std::initializer_list<DurationRange> ranges) {
  for (const DurationRange& r : ranges) {
    if (absl::Status s = CheckDurationIn(r.value, r.field, r.min, r.max); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace falcon::common
