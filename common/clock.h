// Injectable clocks. Components take a `const Clock&` (or `Clock*`) instead of calling absl::Now(),
// so tests drive time with FakeClock. Thread-safe.
#ifndef FALCON_COMMON_CLOCK_H_
#define FALCON_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace falcon::common {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (Unix epoch).
  virtual absl::Time Now() const = 0;
  // Monotonic nanoseconds since an arbitrary origin; never goes backwards.
  virtual int64_t MonotonicNanos() const = 0;
};

// The real clock: absl::Now() and CLOCK_MONOTONIC.
class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  int64_t MonotonicNanos() const override;
};

// A clock that moves only when told to. Monotonic time starts at 0 and advances with Now().
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_(start), start_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  int64_t MonotonicNanos() const override {
    absl::MutexLock lock(&mu_);
    return absl::ToInt64Nanoseconds(now_ - start_);
  }
  // Moves time forward by `d` (must be >= 0).
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    if (d > absl::ZeroDuration()) now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  const absl::Time start_;
};

}  // namespace falcon::common

#endif  // FALCON_COMMON_CLOCK_H_
