// How injected faults spend their extra time: really sleep, burn CPU, or (in tests) just record.
// Thread-safe implementations only.
#ifndef FALCON_COLLECTIVE_FAULT_SLEEPER_H_
#define FALCON_COLLECTIVE_FAULT_SLEEPER_H_

#include "absl/time/time.h"

namespace falcon::collective::fault {

class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // Spends `d` (a non-positive `d` returns at once).
  virtual void Spend(absl::Duration d) = 0;
};

// Blocks the calling thread (absl::SleepFor): the CPU is free meanwhile, as when a rank waits on
// a slow GPU or a slow wire.
class SleepingSleeper : public Sleeper {
 public:
  void Spend(absl::Duration d) override;
};

// Busy-spins on the calling thread's CPU for `d` of wall time, as extra host compute would.
class BurningSleeper : public Sleeper {
 public:
  void Spend(absl::Duration d) override;
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_SLEEPER_H_
