// Exponential backoff with jitter for reconnect loops (the agent's controller stream).
//
// Delay n (n = 0, 1, ...) is min(initial * multiplier^n, max) scaled by a uniform factor in
// [1 - jitter, 1 + jitter], drawn from a seeded generator so tests are deterministic.
// Not thread-safe: one instance per reconnect loop.
#ifndef FALCON_AGENT_BACKOFF_H_
#define FALCON_AGENT_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace falcon::agent {

class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(100);  // First delay; > 0.
    absl::Duration max = absl::Seconds(30);            // Cap before jitter; >= initial.
    double multiplier = 2.0;                           // Growth per attempt; >= 1.
    double jitter = 0.2;                               // Relative spread, [0, 1).
    uint64_t seed = 1;                                 // Jitter generator seed.
  };

  // kInvalidArgument naming the option when `options` is out of range.
  static absl::Status Validate(const Options& options);

  // REQUIRES: Validate(options).ok().
  explicit Backoff(Options options);

  // The delay before the next attempt; advances the attempt counter.
  absl::Duration Next();
  // Back to the initial delay (after a connection that worked).
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  Options options_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_BACKOFF_H_
