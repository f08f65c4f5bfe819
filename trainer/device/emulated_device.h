// falcon::trainer::device::EmulatedDevice: the accelerator of a CPU-only rank, whose speed comes
// from the CPU the rank process really gets, never from a fault parameter.
//
// A device op of nominal duration d (its time on a healthy device) first does duty x d of real
// work on the calling thread, measured in that thread's CPU time (CLOCK_THREAD_CPUTIME_ID), and
// then waits until the op has lasted d x s, where s is the device's slowdown: the wall time the
// recent work took divided by the CPU time it got (>= 1; a sum over the last `window` ops, so one
// preemption does not make one op slow). A healthy rank on an idle core has s ~ 1 and spends only
// duty of device time on the CPU. When the operating system gives the rank less CPU than it asks
// for — a cgroup CPU quota below its demand, or a core shared with a busy process — its work is
// throttled or preempted, s rises, and every device op (training compute, validation GEMM) slows
// alike, as a GPU with a lowered clock slows every kernel. Under a quota q (cores) the device
// settles where the rank's CPU demand meets q.
//
// The host is injectable (Host below) so tests drive CPU time and wall time. Thread-safe: ops
// from several threads (training and the validation executor) share one slowdown estimate, each
// measuring its own thread's CPU time.
#ifndef FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
#define FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace falcon::trainer::device {

// What the device needs from the machine; the default uses the real clocks.
class Host {
 public:
  virtual ~Host() = default;
  virtual int64_t MonotonicNanos() = 0;  // CLOCK_MONOTONIC.
  virtual int64_t ThreadCpuNanos() = 0;  // CLOCK_THREAD_CPUTIME_ID of the calling thread.
  // Computes until the calling thread has used `cpu_ns` more CPU time.
  virtual void Work(int64_t cpu_ns) = 0;
  virtual void SleepFor(absl::Duration d) = 0;
};

// The real host (a process-wide stateless singleton; no mutable state).
Host* RealHost();

struct EmulatedDeviceOptions {
  // Share of a device op's nominal time spent as real CPU work, in (0, 1]. 0.1: a rank's device
  // asks ~10% of a core at full utilization, so 8 ranks fit on 2 cores beside the daemons.
  double duty = 0.1;
  // Ops whose (wall, CPU) times make the slowdown estimate, >= 1.
  int window = 64;
  // The slowdown never goes beyond this (a process stopped for minutes must not sleep for hours
  // afterwards).
  double max_slowdown = 20;
};

class EmulatedDevice {
 public:
  // `host` must outlive the device; nullptr: RealHost().
  explicit EmulatedDevice(EmulatedDeviceOptions options = {}, Host* host = nullptr);

  // Runs one device op of nominal duration `nominal` (<= 0: nothing) on the calling thread and
  // returns the wall time it took.
  absl::Duration Run(absl::Duration nominal);

  // The current slowdown estimate s (>= 1).
  double slowdown() const;
  const EmulatedDeviceOptions& options() const { return options_; }

 private:
  struct Sample {
    int64_t wall_ns;
    int64_t cpu_ns;
  };
  double SlowdownLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EmulatedDeviceOptions options_;
  Host* const host_;
  mutable absl::Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);
  int64_t wall_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cpu_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace falcon::trainer::device

#endif  // FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
