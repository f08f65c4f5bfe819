#include "common/clock.h"

#include <time.h>

namespace falcon::common {

int64_t RealClock::MonotonicNanos() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace falcon::common
