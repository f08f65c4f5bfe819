// Compute fail-slows (fault kind "compute", fault_spec.h) as the trainer applies them: after it
// measured a compute phase that took `compute`, it asks for the extra time its rank must spend at
// this iteration, so the phase effectively takes factor x compute.
//
// Thread-safe (immutable after construction).
#ifndef FALCON_COLLECTIVE_FAULT_COMPUTE_SLOWDOWN_H_
#define FALCON_COLLECTIVE_FAULT_COMPUTE_SLOWDOWN_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "collective/fault/fault_spec.h"
#include "collective/fault/sleeper.h"

namespace falcon::collective::fault {

class ComputeSlowdown {
 public:
  // Keeps the faults of global rank `rank`. `sleeper` (BurningSleeper to occupy the CPU like real
  // compute, SleepingSleeper to idle) must outlive this object.
  ComputeSlowdown(const std::vector<ComputeFault>& faults, int rank, Sleeper* sleeper);

  // Product of the factors of this rank's faults active at `iteration`; 1.0 when none.
  double FactorAt(int64_t iteration) const;
  // (FactorAt(iteration) - 1) * compute; zero when no fault is active or compute <= 0.
  absl::Duration ExtraFor(int64_t iteration, absl::Duration compute) const;
  // Spends ExtraFor(...) through the sleeper and returns it.
  absl::Duration Apply(int64_t iteration, absl::Duration compute) const;

 private:
  std::vector<ComputeFault> faults_;
  Sleeper* sleeper_;
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_COMPUTE_SLOWDOWN_H_
