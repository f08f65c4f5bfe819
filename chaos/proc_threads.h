// The threads of a process as /proc shows them, through a Runner (runner.h): for compute faults
// that throttle only some threads of a rank (compute:...,thread=NAME; fault_spec.h).
//
//   /proc/PID/task/TID/comm       the thread's name (pthread_setname_np, at most 15 bytes)
//   /proc/PID/task/TID/schedstat  first field: nanoseconds on a CPU
//   /proc/PID/task/TID/stat       utime + stime (fields 14, 15) in clock ticks: used where
//                                 schedstat is missing (a kernel without CONFIG_SCHED_INFO)
// A thread that ends while it is being listed or read is left out, not an error.
#ifndef FALCON_CHAOS_PROC_THREADS_H_
#define FALCON_CHAOS_PROC_THREADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chaos/runner.h"

namespace falcon::chaos {

struct ProcThread {
  int tid = 0;
  std::string name;  // comm, without the trailing newline.
};

// The threads of `pid`, by ascending TID. kNotFound "process P does not exist" when
// /proc/P/task cannot be listed.
absl::StatusOr<std::vector<ProcThread>> ListThreads(Runner* runner, int pid);

// The TIDs of `pid`'s threads named `name`, ascending. kNotFound when there is none:
// "process P has no thread named 'NAME' (its threads: 'a' (TID 1), 'b' (TID 2), ...)".
absl::StatusOr<std::vector<int>> ThreadsNamed(Runner* runner, int pid, absl::string_view name);

// CPU time of thread `tid` of `pid` in nanoseconds (schedstat, else stat's utime + stime at
// `clock_ticks_per_second`). kNotFound when the thread has ended; kInternal for a file that does
// not parse (naming it).
absl::StatusOr<int64_t> ThreadCpuNanos(Runner* runner, int pid, int tid,
                                       int64_t clock_ticks_per_second);

// Field `index` (0 = STATE, field 3) after the command of a /proc/.../stat file, as an integer;
// `name` names it in the error (kInternal "PATH: no NAME in '...'").
absl::StatusOr<int64_t> ProcStatField(Runner* runner, const std::string& stat_path, int index,
                                      const char* name);

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_PROC_THREADS_H_
