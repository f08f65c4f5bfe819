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
// The device's clock runs whether or not ops are queued: between ops the device thread runs idle
// cycles (nominal `idle_cycle`, at the same duty and slowdown), so it asks for duty of a core at
// all times, busy or idle. A quota q below that slows it by duty / q whatever its load: when S2
// gives the slow rank fewer micro-batches, each still runs that much slower, as on a GPU with a
// lowered clock. Without idle cycles the device would ask for less CPU when given less work, fit
// under the quota and run at full speed: a capacity limit, not a slow device, and mitigation would
// see the fault clear each time it helped.
//
// Like a GPU stream, the device runs one op at a time on a thread of its own, named
// `falcon-device` (kDeviceThreadName, /proc/PID/task/TID/comm): callers (the training thread, the
// validation executor) hand it an op and wait. So the emulated GPU is one identifiable thread: the
// fault driver can throttle it alone (chaos/: compute:...,thread=falcon-device), slowing the
// device as a lowered clock does while the rank's host threads (communication, the shim) run at
// full speed.
//
// The host is injectable (Host below) so tests drive CPU time and wall time; with own_thread
// false, ops run on the caller's thread (unit tests). Thread-safe.
#ifndef FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
#define FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <thread>

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
  // Share of a device op's nominal time spent as real CPU work, in [0, 1]. 0.1: a rank's device
  // asks ~10% of a core at full utilization, so 8 ranks fit on 2 cores beside the daemons. 0: a
  // fixed-speed device that sleeps its nominal time (no CPU work, blind to the OS: for runs whose
  // faults are injected inside the trainer, where outside load must not move device time).
  double duty = 0.1;
  // Ops whose (wall, CPU) times make the slowdown estimate, >= 1.
  int window = 64;
  // The slowdown never goes beyond this (a process stopped for minutes must not sleep for hours
  // afterwards).
  double max_slowdown = 20;
  // Run ops on the device's own thread (named kDeviceThreadName); false: on the caller's.
  bool own_thread = true;
  // Nominal length of one idle cycle (its work: duty x idle_cycle); zero: no idle cycles, the
  // device asks for CPU only while it runs ops. Ignored when duty is 0.
  absl::Duration idle_cycle = absl::Milliseconds(2);
};

// The name of the device's thread (at most 15 characters, the kernel's limit).
inline constexpr char kDeviceThreadName[] = "falcon-device";

class EmulatedDevice {
 public:
  // `host` must outlive the device; nullptr: RealHost(). Starts the device thread (own_thread).
  explicit EmulatedDevice(EmulatedDeviceOptions options = {}, Host* host = nullptr);
  // Stops the device thread (after the op it runs, if any).
  ~EmulatedDevice();
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;

  // Runs one device op of nominal duration `nominal` (<= 0: nothing) on the calling thread and
  // returns the wall time it took.
  absl::Duration Run(absl::Duration nominal);

  // own_thread false only (the device thread does this itself between ops): the device was idle
  // for `gap` (<= 0: nothing); sleeps through it on the calling thread, running the idle cycles
  // that fall due.
  void Idle(absl::Duration gap);

  // The current slowdown estimate s (>= 1).
  double slowdown() const;
  const EmulatedDeviceOptions& options() const { return options_; }

 private:
  struct Sample {
    int64_t wall_ns;
    int64_t cpu_ns;
  };
  double SlowdownLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One op on the calling thread.
  absl::Duration RunHere(absl::Duration nominal);
  // Does `work_ns` of CPU work on the calling thread, adds it to the window and returns the new
  // slowdown estimate.
  double WorkAndSample(int64_t work_ns);
  // Idle cycles: the wall time to wait before the next idle cycle's work, given the idle time
  // already owed (idle_owed_ns_), and the work of one idle cycle.
  int64_t IdleWaitNanos() const;
  void RunIdleCycleWork();
  bool clocked() const;
  void DeviceLoop();

  const EmulatedDeviceOptions options_;
  Host* const host_;
  mutable absl::Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);
  int64_t wall_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cpu_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // Idle wall time not yet paid for by an idle cycle's work (the thread running idle cycles only:
  // the device thread, or Idle's caller).
  int64_t idle_owed_ns_ = 0;

  // The device thread's queue: one op at a time (submit_mu_ serializes callers).
  absl::Mutex submit_mu_;
  absl::Mutex queue_mu_;
  std::optional<absl::Duration> pending_ ABSL_GUARDED_BY(queue_mu_);
  std::optional<absl::Duration> done_ ABSL_GUARDED_BY(queue_mu_);
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread thread_;
};

}  // namespace falcon::trainer::device

#endif  // FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
