#include "trainer/device/emulated_device.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>

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

EmulatedDevice::EmulatedDevice(EmulatedDeviceOptions options, Host* host)
    : options_(options), host_(host != nullptr ? host : RealHost()) {
  if (options_.own_thread) thread_ = std::thread([this] { DeviceLoop(); });
}

EmulatedDevice::~EmulatedDevice() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&queue_mu_);
    stop_ = true;
  }
  thread_.join();
}

void EmulatedDevice::DeviceLoop() {
  pthread_setname_np(pthread_self(), kDeviceThreadName);
  const auto ready = +[](EmulatedDevice* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->queue_mu_) {
    return d->stop_ || d->pending_.has_value();
  };
  for (;;) {
    std::optional<absl::Duration> op;
    {
      absl::MutexLock lock(&queue_mu_);
      if (!clocked()) {
        queue_mu_.Await(absl::Condition(ready, this));
      } else {
        // Between ops the clock runs: wait for an op at most until the next idle cycle is due.
        const int64_t start = host_->MonotonicNanos();
        queue_mu_.AwaitWithTimeout(absl::Condition(ready, this),
                                   absl::Nanoseconds(IdleWaitNanos()));
        idle_owed_ns_ += host_->MonotonicNanos() - start;
      }
      if (pending_.has_value()) {
        op = *pending_;
      } else if (stop_) {
        return;  // Stopped with nothing to run.
      }
    }
    if (!op.has_value()) {
      if (IdleWaitNanos() == 0) RunIdleCycleWork();
      continue;
    }
    const absl::Duration took = RunHere(*op);
    absl::MutexLock lock(&queue_mu_);
    pending_.reset();
    done_ = took;
  }
}

bool EmulatedDevice::clocked() const {
  return options_.duty > 0 && options_.idle_cycle > absl::ZeroDuration();
}

int64_t EmulatedDevice::IdleWaitNanos() const {
  const double cycle_wait_ns = absl::ToDoubleNanoseconds(options_.idle_cycle) * slowdown() *
                               (1.0 - std::min(options_.duty, 1.0));
  return std::max<int64_t>(0, static_cast<int64_t>(cycle_wait_ns) - idle_owed_ns_);
}

void EmulatedDevice::RunIdleCycleWork() {
  const double cycle_wait_ns = absl::ToDoubleNanoseconds(options_.idle_cycle) * slowdown() *
                               (1.0 - std::min(options_.duty, 1.0));
  idle_owed_ns_ = std::max<int64_t>(0, idle_owed_ns_ - static_cast<int64_t>(cycle_wait_ns));
  WorkAndSample(std::max<int64_t>(
      1, static_cast<int64_t>(absl::ToDoubleNanoseconds(options_.idle_cycle) * options_.duty)));
}

void EmulatedDevice::Idle(absl::Duration gap) {
  int64_t left = absl::ToInt64Nanoseconds(gap);
  if (left <= 0) return;
  if (!clocked() || thread_.joinable()) {
    host_->SleepFor(gap);
    return;
  }
  while (left > 0) {
    const int64_t wait = IdleWaitNanos();
    if (wait >= left) {
      host_->SleepFor(absl::Nanoseconds(left));
      idle_owed_ns_ += left;
      return;
    }
    host_->SleepFor(absl::Nanoseconds(wait));
    idle_owed_ns_ += wait;
    left -= wait;
    const int64_t start = host_->MonotonicNanos();
    RunIdleCycleWork();
    left -= host_->MonotonicNanos() - start;
  }
}

double EmulatedDevice::SlowdownLocked() const {
  if (cpu_sum_ns_ <= 0) return 1.0;
  const double s = static_cast<double>(wall_sum_ns_) / static_cast<double>(cpu_sum_ns_);
  return std::clamp(s, 1.0, options_.max_slowdown);
}

double EmulatedDevice::slowdown() const {
  absl::MutexLock lock(&mu_);
  return SlowdownLocked();
}

absl::Duration EmulatedDevice::Run(absl::Duration nominal) {
  if (nominal <= absl::ZeroDuration()) return absl::ZeroDuration();
  if (!thread_.joinable()) return RunHere(nominal);
  absl::MutexLock submit(&submit_mu_);
  absl::MutexLock lock(&queue_mu_);
  done_.reset();
  pending_ = nominal;
  queue_mu_.Await(absl::Condition(
      +[](EmulatedDevice* d)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->queue_mu_) { return d->done_.has_value(); },
      this));
  const absl::Duration took = *done_;
  done_.reset();
  return took;
}

absl::Duration EmulatedDevice::RunHere(absl::Duration nominal) {
  if (options_.duty <= 0) {
    const int64_t start = host_->MonotonicNanos();
    host_->SleepFor(nominal);
    return absl::Nanoseconds(host_->MonotonicNanos() - start);
  }
  const int64_t nominal_ns = absl::ToInt64Nanoseconds(nominal);
  const int64_t work_ns =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(nominal_ns) * options_.duty));
  const int64_t start = host_->MonotonicNanos();
  const double s = WorkAndSample(work_ns);
  const int64_t target = static_cast<int64_t>(static_cast<double>(nominal_ns) * s);
  const int64_t elapsed = host_->MonotonicNanos() - start;
  if (target > elapsed) host_->SleepFor(absl::Nanoseconds(target - elapsed));
  return absl::Nanoseconds(host_->MonotonicNanos() - start);
}

double EmulatedDevice::WorkAndSample(int64_t work_ns) {
  const int64_t start = host_->MonotonicNanos();
  const int64_t cpu_start = host_->ThreadCpuNanos();
  host_->Work(work_ns);
  const int64_t wall = host_->MonotonicNanos() - start;
  const int64_t cpu = std::max<int64_t>(1, host_->ThreadCpuNanos() - cpu_start);
  absl::MutexLock lock(&mu_);
  samples_.push_back({wall, cpu});
  wall_sum_ns_ += wall;
  cpu_sum_ns_ += cpu;
  while (static_cast<int>(samples_.size()) > std::max(1, options_.window)) {
    wall_sum_ns_ -= samples_.front().wall_ns;
    cpu_sum_ns_ -= samples_.front().cpu_ns;
    samples_.pop_front();
  }
  return SlowdownLocked();
}

}  // namespace falcon::trainer::device
