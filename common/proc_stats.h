// What the kernel says about a process's resources (proc(5)), for benchmarks that measure a
// daemon from outside (controller CPU and memory in the soak and fleet benchmarks) or
// themselves. Linux only.
#ifndef FALCON_COMMON_PROC_STATS_H_
#define FALCON_COMMON_PROC_STATS_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace falcon::common {

// The calling process.
inline constexpr int kSelf = 0;

// User + system CPU time of `pid` so far, in seconds (/proc/PID/stat utime + stime).
// kNotFound: no such process; kInternal: an unreadable stat line.
absl::StatusOr<double> ProcessCpuSeconds(int pid);
// Resident set size (VmRSS) and its peak (VmHWM) of `pid`, in bytes (/proc/PID/status).
// kNotFound: no such process or field.
absl::StatusOr<int64_t> ResidentBytes(int pid);
absl::StatusOr<int64_t> PeakResidentBytes(int pid);

}  // namespace falcon::common

#endif  // FALCON_COMMON_PROC_STATS_H_
