// Abseil Mutex settings of Falcon's long-running processes.
#ifndef FALCON_COMMON_MUTEX_MODE_H_
#define FALCON_COMMON_MUTEX_MODE_H_

namespace falcon::common {

// In optimized builds (NDEBUG: `-c opt`, what `./falcon bench` and the packages run), turns off
// Abseil's Mutex deadlock detection. It is a debug check: every absl::Mutex lock in the process,
// gRPC's included, then updates one process-wide lock-order graph under a global lock (3 % of a
// 16,384-rank controller's CPU in `perf`, docs/fleet.md). Test builds (fastbuild, no NDEBUG) keep
// it. Call once at the start of main, before any thread is started.
void SetReleaseMutexMode();

}  // namespace falcon::common

#endif  // FALCON_COMMON_MUTEX_MODE_H_
