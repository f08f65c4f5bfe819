// falcon::trainer::device::EmulatedDevice: the accelerator of a CPU-only rank, whose speed comes
// from the CPU the rank process really gets, never from a fault parameter.
//
// The device's clock is a steady demand for CPU: every `tick` (busy or idle) its thread does
// duty x tick of real work, measured in that thread's CPU time (CLOCK_THREAD_CPUTIME_ID). Its
// slowdown s is the CPU it asked for over the CPU it got in the last `rate_window` of wall time
// (>= 1): the slices that fell due while one ran late (throttled, or its core busy) are not made
// up, only the next runs at once, so the device falls behind by what it missed (and while it gets
// less than its duty its slices run back to back, asking for what it can get). A device op of
// nominal duration d (its time on a healthy device) lasts until d of device time has passed, device
// time running at 1/s of wall time. A healthy rank gets its duty of a core and runs ops in their
// nominal time. Under a cgroup CPU quota q below duty it gets q: s = duty / q, whatever the ops,
// since the demand never depends on them: fewer or shorter ops (S2 giving the slow rank fewer
// micro-batches, S2L fewer layers) neither escape the quota nor meet its throttling at another
// phase, as a GPU with a lowered clock slows every kernel alike. A core shared with busy processes
// slows the device only when they leave it less than its duty.
//
// (An earlier device did each op's share of work in one burst at the op's start and timed ops
// by the wall time of those bursts over their CPU time. Under the kernel's per-period quota the
// bursts met the throttle at an average demand below the quota: a x1.5 quota slowed it x1.9 and
// more for shorter ops, so a stage given fewer layers read as a stronger fault.)
//
// Like a GPU stream, the device runs one op at a time: callers (the training thread, the
// validation executor) take turns, each waiting until its op's device time has passed. The clock
// runs on a thread of its own, named `falcon-device` (kDeviceThreadName,
// /proc/PID/task/TID/comm), so the emulated GPU is one identifiable thread: the fault driver can
// throttle it alone (chaos/: compute:...,thread=falcon-device), slowing the device as a lowered
// clock does while the rank's host threads (communication, the shim) run at full speed. The
// caller, not the throttled thread, ends the op: an op does not wait for the end of the quota
// period the clock thread is throttled in.
//
// The host is injectable (Host below) so tests drive CPU time and wall time; with own_thread
// false, the clock runs on the caller's thread inside Run and Idle only (unit tests). Thread-safe.
#ifndef FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
#define FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace falcon::trainer::device {

// What the device needs from the machine; the default uses the real clocks. With own_thread the
// device thread and the callers of Run use it at once: it must be thread-safe then (RealHost is).
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
  // Share of a core the device asks for, busy or idle, in [0, 1]: its real CPU work is duty x
  // the wall time. 0.1: 8 ranks' devices fit on 2 cores beside the daemons. 0: a fixed-speed
  // device that sleeps its nominal time (no CPU work, blind to the OS: for runs whose faults are
  // injected inside the trainer, where outside load must not move device time).
  double duty = 0.1;
  // The clock's period: every tick the device does duty x tick of work (> 0). Ignored when duty
  // is 0.
  absl::Duration tick = absl::Milliseconds(2);
  // Wall time over which the slowdown is measured (> 0): whole periods of the kernel's quota
  // (the demo's 30 ms) so the throttling within one period averages out; longer is steadier and
  // follows a new fault later.
  absl::Duration rate_window = absl::Milliseconds(300);
  // The slowdown never goes beyond this (a process stopped for minutes must not sleep for hours
  // afterwards).
  double max_slowdown = 20;
  // Run the clock on the device's own thread (named kDeviceThreadName; none when duty is 0);
  // false: on the thread that calls Run and Idle, inside them (one thread: the clock's CPU time
  // is that thread's; unit tests).
  bool own_thread = true;
};

// The name of the device's thread (at most 15 characters, the kernel's limit).
inline constexpr char kDeviceThreadName[] = "falcon-device";

class EmulatedDevice {
 public:
  // `host` must outlive the device; nullptr: RealHost(). Starts the device thread (own_thread and
  // duty > 0). Options outside their ranges are brought to the nearest bound (duty to [0, 1],
  // max_slowdown to >= 1, tick to [10 us, 1 s], rate_window to [tick, 60 s]).
  explicit EmulatedDevice(EmulatedDeviceOptions options = {}, Host* host = nullptr);
  // Stops the device thread.
  ~EmulatedDevice();
  EmulatedDevice(const EmulatedDevice&) = delete;
  EmulatedDevice& operator=(const EmulatedDevice&) = delete;

  // Runs one device op of nominal duration `nominal` (<= 0: nothing) and returns the wall time it
  // took: nominal x the slowdown while it ran. Ops run one at a time (concurrent callers take
  // turns); with own_thread the caller waits for its op while the device thread runs the clock.
  absl::Duration Run(absl::Duration nominal);

  // own_thread false only (the device thread's clock runs by itself): the device was idle for
  // `gap` (<= 0: nothing); runs the clock through it on the calling thread.
  void Idle(absl::Duration gap);

  // The current slowdown estimate s (>= 1).
  double slowdown() const;
  const EmulatedDeviceOptions& options() const { return options_; }

 private:
  // One slice of the clock: its wall end, the CPU it asked for and the CPU it did.
  struct Slice {
    int64_t end_ns;
    double wanted_ns;
    int64_t cpu_ns;
  };
  // The op being run: device time done so far, as of wall time last_ns.
  struct Op {
    int64_t nominal_ns;
    int64_t start_ns;
    int64_t last_ns;
    double done_ns = 0;
  };
  bool clocked() const;
  // The end of the slice before the first one due at `now` (so a healthy first slice asks for
  // one tick's CPU).
  int64_t FirstLastEnd(int64_t now) const;
  double SlowdownLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Does the slice that is due (duty x tick of work) and records it; sets the next one's due
  // time (a slice that ran late is not made up).
  void RunSlice();
  // Advances `op` to wall time `now` at the current slowdown; once done, the wall time its
  // device time ran out (<= now).
  std::optional<int64_t> Advance(Op& op, int64_t now) const;
  // Wall time until `op` is done at the current slowdown (>= 1 ns).
  int64_t RemainingNanos(const Op& op) const;
  // Inline clock (own_thread false): a gap since the last Run or Idle was not asked for.
  void ResumeInline(int64_t now);
  // One op with the clock on the calling thread (own_thread false, or no clock: duty 0).
  absl::Duration RunHere(absl::Duration nominal);
  void DeviceLoop();

  const EmulatedDeviceOptions options_;
  Host* const host_;
  mutable absl::Mutex mu_;
  std::deque<Slice> slices_ ABSL_GUARDED_BY(mu_);  // Those that ended in the rate window.
  double wanted_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cpu_sum_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // The clock's schedule (the thread running it only: the device thread, or Run/Idle's caller).
  int64_t next_due_ns_ = 0;
  int64_t last_end_ns_ = 0;
  int64_t last_cpu_ns_ = 0;    // The clock thread's CPU time when the last slice ended.
  int64_t cpu_target_ns_ = 0;  // Its CPU time the last slice worked up to.

  absl::Mutex submit_mu_;  // One op at a time: callers take turns.
  absl::Mutex stop_mu_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::atomic<bool> stopping_{false};  // stop_, read by the clock between slices.
  std::thread thread_;
};

}  // namespace falcon::trainer::device

#endif  // FALCON_TRAINER_DEVICE_EMULATED_DEVICE_H_
