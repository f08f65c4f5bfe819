// S4 (docs/algorithms.md#s4-checkpoint-and-restart): the layout a job restarts on after a
// checkpoint_restart directive. The excluded ranks' processes are gone; the survivors keep their
// order and are renumbered 0, 1, ...; the pipeline depth stays, and the job runs as many DP groups
// as the survivors fill (and the global batch can feed: at most M / PP). Injected faults follow the
// hardware: a fault of an excluded rank (or a link touching one) disappears, the others are
// renumbered.
//
// Pure; thread-safe.
#ifndef FALCON_TRAINER_CHECKPOINT_RESTART_PLAN_H_
#define FALCON_TRAINER_CHECKPOINT_RESTART_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collective/fault/fault_spec.h"

namespace falcon::trainer::checkpoint {

struct RestartPlan {
  int world = 1;
  int dp = 1;
  int pp = 1;
  int nodes = 1;              // Emulated nodes: the largest divisor of world <= the old count.
  std::vector<int> old_rank;  // New rank i was old rank old_rank[i].
  collective::fault::FaultPlan faults;
};

// kInvalidArgument for an excluded rank outside [0, old_world); kFailedPrecondition when fewer
// than `pp` ranks survive.
absl::StatusOr<RestartPlan> PlanRestart(int old_world, int pp, int micro_batches,
                                        const std::vector<int>& excluded,
                                        const collective::fault::FaultPlan& faults, int nodes);

}  // namespace falcon::trainer::checkpoint

#endif  // FALCON_TRAINER_CHECKPOINT_RESTART_PLAN_H_
