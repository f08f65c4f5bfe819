#include "trainer/device/emulated_device.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace falcon::trainer::device {
namespace {

int64_t ReadClock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

class RealHostImpl : public Host {
 public:
  int64_t MonotonicNanos() override { return ReadClock(CLOCK_MONOTONIC); }
  int64_t ThreadCpuNanos() override { return ReadClock(CLOCK_THREAD_CPUTIME_ID); }
  void Work(int64_t cpu_ns) override {
    const int64_t until = ThreadCpuNanos() + cpu_ns;
    // Integer work the compiler cannot drop (the result feeds the loop condition's volatile).
    volatile uint64_t sink = 0;
    uint64_t x = 88172645463325252ull;
    while (ThreadCpuNanos() < until) {
      for (int i = 0; i < 2048; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
      sink = x;
    }
    (void)sink;
  }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

}  // namespace

Host* RealHost() {
  static RealHostImpl* const host = new RealHostImpl();
  return host;
}

namespace {

// The options in their documented ranges (emulated_device.h): a duty outside [0, 1], a slowdown
// cap below 1, or a tick or window that is not positive and finite would stall an op or divide by
// zero.
EmulatedDeviceOptions Bounded(EmulatedDeviceOptions o) {
  o.duty = std::isfinite(o.duty) ? std::clamp(o.duty, 0.0, 1.0) : 0.0;
  o.max_slowdown = std::isfinite(o.max_slowdown) ? std::clamp(o.max_slowdown, 1.0, 1e6) : 20.0;
  o.tick = std::clamp(o.tick, absl::Microseconds(10), absl::Seconds(1));
  o.rate_window = std::clamp(o.rate_window, o.tick, absl::Seconds(60));
  return o;
}

}  // namespace

EmulatedDevice::EmulatedDevice(EmulatedDeviceOptions options, Host* host)
    : options_(Bounded(options)), host_(host != nullptr ? host : RealHost()) {
  const int64_t now = host_->MonotonicNanos();
  next_due_ns_ = now;
  last_end_ns_ = FirstLastEnd(now);
  last_cpu_ns_ = host_->ThreadCpuNanos();  // The caller's clock, inline; reset by DeviceLoop.
  if (options_.own_thread && clocked()) thread_ = std::thread([this] { DeviceLoop(); });
}

EmulatedDevice::~EmulatedDevice() {
  if (!thread_.joinable()) return;
  {
    stopping_.store(true, std::memory_order_release);
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  thread_.join();
}

int64_t EmulatedDevice::FirstLastEnd(int64_t now) const {
  // Where a healthy clock's previous slice would have ended, a tick before this one's end.
  return now -
         static_cast<int64_t>(absl::ToDoubleNanoseconds(options_.tick) * (1.0 - options_.duty));
}

bool EmulatedDevice::clocked() const {
  return options_.duty > 0;  // Bounded: the tick is positive.
}

void EmulatedDevice::RunSlice() {
  const int64_t tick_ns = absl::ToInt64Nanoseconds(options_.tick);
  // A tick's duty of CPU in all, kept as a running target: the clock's waking and bookkeeping
  // and the work's overshoot count toward it, so the thread uses exactly duty of a core (what a
  // fault's quota of duty / F divides) and a quota counts all of it alike. A slice that could not
  // run when due is not added: no catch-up.
  const int64_t slice_ns = static_cast<int64_t>(static_cast<double>(tick_ns) * options_.duty);
  // Past the target by more than a slice (the thread's CPU before the clock started, or a caller's
  // own work inline): start from where the thread is.
  if (last_cpu_ns_ - cpu_target_ns_ > slice_ns) cpu_target_ns_ = last_cpu_ns_;
  cpu_target_ns_ += slice_ns;
  host_->Work(std::max<int64_t>(1, cpu_target_ns_ - host_->ThreadCpuNanos()));
  const int64_t cpu_now = host_->ThreadCpuNanos();
  const int64_t cpu = std::max<int64_t>(1, cpu_now - last_cpu_ns_);
  last_cpu_ns_ = cpu_now;
  const int64_t end = host_->MonotonicNanos();
  // The device asked for duty of a core all the time since the last slice ended, however long
  // this one waited to run or took.
  const double wanted = options_.duty * static_cast<double>(end - last_end_ns_);
  last_end_ns_ = end;
  next_due_ns_ = std::max(next_due_ns_ + tick_ns, end);
  absl::MutexLock lock(&mu_);
  slices_.push_back({end, wanted, cpu});
  wanted_sum_ns_ += wanted;
  cpu_sum_ns_ += cpu;
  const int64_t window_start = end - absl::ToInt64Nanoseconds(options_.rate_window);
  while (slices_.size() > 1 && slices_.front().end_ns < window_start) {
    wanted_sum_ns_ -= slices_.front().wanted_ns;
    cpu_sum_ns_ -= slices_.front().cpu_ns;
    slices_.pop_front();
  }
}

double EmulatedDevice::SlowdownLocked() const {
  if (cpu_sum_ns_ <= 0) return 1.0;
  return std::clamp(wanted_sum_ns_ / static_cast<double>(cpu_sum_ns_), 1.0, options_.max_slowdown);
}

double EmulatedDevice::slowdown() const {
  absl::MutexLock lock(&mu_);
  return SlowdownLocked();
}

std::optional<int64_t> EmulatedDevice::Advance(Op& op, int64_t now) const {
  const double s = slowdown();
  const double left_ns = static_cast<double>(op.nominal_ns) - op.done_ns;
  // Half a nanosecond: the rounding of RemainingNanos' waits.
  if (static_cast<double>(now - op.last_ns) / s + 0.5 >= left_ns) {
    return op.last_ns + static_cast<int64_t>(std::llround(left_ns * s));
  }
  op.done_ns += static_cast<double>(now - op.last_ns) / s;
  op.last_ns = now;
  return std::nullopt;
}

int64_t EmulatedDevice::RemainingNanos(const Op& op) const {
  const double left = (static_cast<double>(op.nominal_ns) - op.done_ns) * slowdown();
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(left)));
}

void EmulatedDevice::ResumeInline(int64_t now) {
  const int64_t tick_ns = absl::ToInt64Nanoseconds(options_.tick);
  if (now - last_end_ns_ <= 2 * tick_ns) return;
  // Nobody ran the clock since the last call: that time was not asked for.
  next_due_ns_ = now;
  last_end_ns_ = FirstLastEnd(now);
  last_cpu_ns_ = host_->ThreadCpuNanos();
}

absl::Duration EmulatedDevice::Run(absl::Duration nominal) {
  if (nominal <= absl::ZeroDuration()) return absl::ZeroDuration();
  absl::MutexLock submit(&submit_mu_);  // One op at a time, whoever runs the clock.
  if (!thread_.joinable()) return RunHere(nominal);
  // The caller times its op on the device's clock, which the device thread runs: an op ends when
  // its device time has passed, even while that thread is throttled.
  const int64_t start = host_->MonotonicNanos();
  Op op{absl::ToInt64Nanoseconds(nominal), start, start};
  for (;;) {
    const int64_t now = host_->MonotonicNanos();
    if (Advance(op, now).has_value()) return absl::Nanoseconds(now - start);
    // The slowdown moves slowly (a rate over rate_window): one wait, and another if it rose.
    host_->SleepFor(absl::Nanoseconds(RemainingNanos(op)));
  }
}

absl::Duration EmulatedDevice::RunHere(absl::Duration nominal) {
  const int64_t start = host_->MonotonicNanos();
  if (!clocked()) {
    host_->SleepFor(nominal);
    return absl::Nanoseconds(host_->MonotonicNanos() - start);
  }
  ResumeInline(start);
  Op op{absl::ToInt64Nanoseconds(nominal), start, start};
  for (;;) {
    const int64_t now = host_->MonotonicNanos();
    // Inline, a slice cannot be cut short: the op ends where its device time ran out, as it does
    // on the device thread's clock (Run), not where the slice it ran out in ended.
    if (std::optional<int64_t> end = Advance(op, now)) return absl::Nanoseconds(*end - start);
    if (now >= next_due_ns_) {
      RunSlice();
      continue;
    }
    host_->SleepFor(absl::Nanoseconds(std::min(next_due_ns_ - now, RemainingNanos(op))));
  }
}

void EmulatedDevice::Idle(absl::Duration gap) {
  if (gap <= absl::ZeroDuration()) return;
  if (!clocked() || thread_.joinable()) {
    host_->SleepFor(gap);
    return;
  }
  absl::MutexLock submit(&submit_mu_);
  const int64_t start = host_->MonotonicNanos();
  ResumeInline(start);
  const int64_t until = start + absl::ToInt64Nanoseconds(std::min(gap, absl::Hours(24 * 365)));
  for (;;) {
    const int64_t now = host_->MonotonicNanos();
    if (now >= until) return;
    if (now >= next_due_ns_) {
      RunSlice();
      continue;
    }
    host_->SleepFor(absl::Nanoseconds(std::min(next_due_ns_, until) - now));
  }
}

void EmulatedDevice::DeviceLoop() {
  pthread_setname_np(pthread_self(), kDeviceThreadName);
  last_cpu_ns_ = host_->ThreadCpuNanos();
  const auto stopped =
      +[](EmulatedDevice* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->stop_mu_) { return d->stop_; };
  for (;;) {
    // Checked before every slice: a clock that gets less than its duty runs its slices back to
    // back and would not reach the wait below.
    if (stopping_.load(std::memory_order_acquire)) return;
    const int64_t now = host_->MonotonicNanos();
    if (now >= next_due_ns_) {
      RunSlice();
      continue;
    }
    absl::MutexLock lock(&stop_mu_);
    if (stop_mu_.AwaitWithTimeout(absl::Condition(stopped, this),
                                  absl::Nanoseconds(next_due_ns_ - now))) {
      return;
    }
  }
}

}  // namespace falcon::trainer::device
