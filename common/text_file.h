// Reading a whole input file into memory, bounded: every reader of user-given files (recorded
// series, layouts, traces, config files, directive scripts) goes through ReadTextFile, so a file
// that never ends (/dev/zero, a FIFO fed forever) or is far larger than any sane input stops at a
// limit instead of growing the process without bound.
//
// Errors (absl::Status, the message starting with the path):
//   kNotFound           the file does not exist: "PATH: cannot open file (No such file or ...)";
//   kPermissionDenied   it cannot be read for lack of permission;
//   kInvalidArgument    PATH is a directory: "PATH: is a directory, not a file";
//   kResourceExhausted  more than `max_bytes` bytes: "PATH: larger than the limit of N bytes
//                       (LIMIT_NAME)", LIMIT_NAME naming the flag or setting that raises it;
//   kUnknown            another open or read error, with strerror.
// Regular files, pipes and character devices are read the same way (to end of file or the limit).
#ifndef FALCON_COMMON_TEXT_FILE_H_
#define FALCON_COMMON_TEXT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::common {

// The default limit: 64 MiB, far above the real traces Falcon reads (a few MiB) and small enough
// that parsing it stays within a few hundred MiB of memory.
inline constexpr uint64_t kDefaultMaxTextFileBytes = uint64_t{64} << 20;

// The contents of `path`, at most `max_bytes` bytes (see the header comment for errors).
// `limit_name` names what sets the limit in the error (e.g. "--max_input_bytes"); "" for none.
absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         uint64_t max_bytes = kDefaultMaxTextFileBytes,
                                         absl::string_view limit_name = "");

// Writes `contents` to `path` atomically: to PATH.tmp.PID first, fsync'd, then renamed over
// `path`, so a reader sees the old or the new file, never a part. kInternal naming the path, with
// strerror, when a step fails (the temporary file is removed then).
absl::Status WriteTextFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace falcon::common

#endif  // FALCON_COMMON_TEXT_FILE_H_
