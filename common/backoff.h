// Exponential backoff with jitter for reconnect loops (the agent's controller stream, the shim's
// agent link).
//
// Delay n (n = attempts since Reset: 0, 1, ...) is min(initial * multiplier^n, max), scaled by a
// uniform factor in [1 - jitter, 1 + jitter], and capped at max again: no delay ever exceeds max.
// The jitter is drawn from a generator seeded with Options::seed, so the sequence is a pure
// function of the options (tests are deterministic; give each process its own seed to spread
// reconnects). The caller sleeps; Backoff reads no clock.
// Not thread-safe: one instance per reconnect loop.
#ifndef FALCON_COMMON_BACKOFF_H_
#define FALCON_COMMON_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::common {

class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(100);  // First delay; > 0.
    absl::Duration max = absl::Seconds(30);            // Cap on every delay; >= initial.
    double multiplier = 2.0;                           // Growth per attempt; >= 1.
    double jitter = 0.2;                               // Relative spread, in [0, 1).
    uint64_t seed = 1;                                 // Seeds the jitter generator.
  };

  // OK, or kInvalidArgument "<field_prefix><option>: <rule>" for the first option out of range
  // (field_prefix names the options where the caller reads them: "backoff_", "options.backoff.").
  static absl::Status Validate(const Options& options, absl::string_view field_prefix = "");

  // REQUIRES: Validate(options).ok().
  explicit Backoff(Options options) : options_(options), rng_(options.seed) {}

  // The delay before the next attempt; advances the attempt counter.
  absl::Duration Next();
  // Back to the initial delay (after a connection that worked).
  void Reset() { attempt_ = 0; }
  // Attempts since construction or the last Reset.
  int attempt() const { return attempt_; }

 private:
  Options options_;
  std::mt19937_64 rng_;
  int attempt_ = 0;
};

}  // namespace falcon::common

#endif  // FALCON_COMMON_BACKOFF_H_
