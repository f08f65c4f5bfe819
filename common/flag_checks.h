// Checks of the values given to Falcon's binaries on the command line or in a config file, in one
// place so that every binary refuses the same way: durations that are infinite, NaN or outside a
// sane range (a 1ns tick spins a core), integers outside their range (never wrapped or clamped),
// empty or overlong paths, and positional arguments a flags-only program would silently ignore.
//
// Every error is kInvalidArgument whose message starts with `field` (the caller's name for the
// value: "--tick", "heartbeat_interval"), then ": ", then what is wrong and the accepted range,
// e.g. "--tick: 1ns is not in [10ms, 1m]". With an empty `field` the message starts at what is
// wrong (for parsers such as CLI11 that prefix the flag's name themselves).
#ifndef FALCON_COMMON_FLAG_CHECKS_H_
#define FALCON_COMMON_FLAG_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::common {

// A duration written as an Abseil duration ("1.5s", "500ms", "10m", "1h30m") or plain seconds
// ("2.5"). Refuses anything infinite ("inf", a NaN, a value beyond Abseil's range), so the result
// is always finite; the sign is the caller's to check (CheckDurationIn).
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text, absl::string_view field);

// OK when `d` is finite and in [min, max]: "FIELD: 1ns is not in [10ms, 1m]" otherwise.
absl::Status CheckDurationIn(absl::Duration d, absl::string_view field, absl::Duration min,
                             absl::Duration max);

// OK when `v` is in [min, max]: "FIELD: -1 is not in [1, 1000]" otherwise.
absl::Status CheckIntegerIn(int64_t v, absl::string_view field, int64_t min, int64_t max);

// A flag's value and its range, for checking many flags at once.
struct IntegerRange {
  absl::string_view field;
  int64_t value;
  int64_t min;
  int64_t max;
};
struct DurationRange {
  absl::string_view field;
  absl::Duration value;
  absl::Duration min;
  absl::Duration max;
};
// CheckIntegerIn / CheckDurationIn on each, in order: the first error, or OK.
absl::Status CheckIntegersIn(std::initializer_list<IntegerRange> ranges);
absl::Status CheckDurationsIn(std::initializer_list<DurationRange> ranges);

// OK when `v` is a finite number in [min, max]: "FIELD: nan is not a number in [0, 1]".
absl::Status CheckNumberIn(double v, absl::string_view field, double min, double max);

// Decimal digits only (no sign, no "0x", no octal reading of a leading 0), in [0, max]:
// "FIELD: '4294967297' is not an integer in [0, 4294967295]".
absl::StatusOr<uint64_t> ParseCount(absl::string_view text, absl::string_view field, uint64_t max);

// A path given as a flag or setting: non-empty and shorter than PATH_MAX (4096 bytes).
absl::Status CheckPath(absl::string_view path, absl::string_view field);

// A directory path that the program creates when missing: CheckPath, and when something exists
// at `path` it is a directory ("FIELD: 'PATH' exists and is not a directory").
absl::Status CheckDirectoryPath(const std::string& path, absl::string_view field);

// For programs that take flags only: `positional` is what absl::ParseCommandLine returned
// (argv[0] first). "unexpected argument 'X' (this program takes flags only; see --help)" for the
// first argument after argv[0], OK when there is none.
absl::Status CheckNoPositionals(const std::vector<char*>& positional);

}  // namespace falcon::common

#endif  // FALCON_COMMON_FLAG_CHECKS_H_
