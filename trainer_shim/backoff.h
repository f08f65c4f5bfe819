// Exponential reconnect backoff with seeded jitter. Not thread-safe: one owner (the link thread).
#ifndef FALCON_TRAINER_SHIM_BACKOFF_H_
#define FALCON_TRAINER_SHIM_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace falcon::shim {

class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(50);  // First delay. Default 50 ms.
    absl::Duration max = absl::Seconds(5);            // Cap on the delay. Default 5 s.
    double multiplier = 2.0;                          // Growth per attempt, >= 1. Default 2.
    double jitter =
        0.2;            // Each delay is scaled by a uniform factor in [1 - j, 1 + j], j in [0, 1).
    uint64_t seed = 1;  // Seeds the jitter, so tests are deterministic.
  };

  // kInvalidArgument naming the bad field.
  static absl::Status Validate(const Options& options);

  explicit Backoff(Options options) : options_(options), rng_(options.seed) {}

  // The delay before the next attempt: initial * multiplier^n (n = attempts since Reset), capped
  // at max, then jittered (the jittered value is capped at max as well).
  absl::Duration Next();
  // Back to `initial` (after a successful connection).
  void Reset() { attempts_ = 0; }

 private:
  Options options_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
};

}  // namespace falcon::shim

#endif  // FALCON_TRAINER_SHIM_BACKOFF_H_
