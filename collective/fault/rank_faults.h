// Everything a rank's training loop needs from a fault spec, in one object: the compute slowdown
// of this rank and its CPU contention controller (slow links go to CommRuntime through
// world.h's MakeRuntime). Typical loop:
//
//   auto faults = RankFaults::Create(env.faults, env.rank);   // "" = no faults
//   for (int64_t it = 0; ...; ++it) {
//     runtime->SetIteration(it);
//     (*faults)->OnIteration(it);                             // contention on/off
//     absl::Duration compute = RunComputePhase();
//     (*faults)->compute().Apply(it, compute);                // burn (factor - 1) x compute
//     ... communicator ops ...
//   }
//
// Not thread-safe (OnIteration); compute() is immutable.
#ifndef FALCON_COLLECTIVE_FAULT_RANK_FAULTS_H_
#define FALCON_COLLECTIVE_FAULT_RANK_FAULTS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collective/fault/compute_slowdown.h"
#include "collective/fault/contention.h"
#include "collective/fault/fault_spec.h"
#include "collective/fault/sleeper.h"

namespace falcon::collective::fault {

class RankFaults {
 public:
  // `spec` as LoadFaultSpec ("" for none, "@file" for a file). `burn`: compute slowdowns occupy
  // the CPU (BurningSleeper) rather than sleep. Errors as LoadFaultSpec.
  static absl::StatusOr<std::unique_ptr<RankFaults>> Create(absl::string_view spec, int rank,
                                                            bool burn = true,
                                                            ContentionOptions contention = {});

  const FaultPlan& plan() const { return plan_; }
  const ComputeSlowdown& compute() const { return compute_; }
  ContentionController& contention() { return contention_; }
  // Starts/stops this rank's contention for `iteration` (see ContentionController).
  absl::Status OnIteration(int64_t iteration) { return contention_.OnIteration(iteration); }

 private:
  RankFaults(FaultPlan plan, int rank, bool burn, ContentionOptions contention);

  FaultPlan plan_;
  std::unique_ptr<Sleeper> sleeper_;
  ComputeSlowdown compute_;
  ContentionController contention_;
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_RANK_FAULTS_H_
