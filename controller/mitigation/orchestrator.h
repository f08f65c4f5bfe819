// Mitigation orchestration (docs/algorithms.md#escalation): a MitigationHook that takes a
// verdict through the escalation ladder S1 → S2 → S3 → S4 (analysis/plan/escalation.h, ski
// rental: a level is bought once the time already lost reaches its cost) and acts through the
// controller's directive protocol.
//   - Costs from the job's settings: S2 = s2_cost_iterations × Δt_iter (Δt_iter = slow − healthy
//     iteration time of the event), S3 = s3_cost_seconds, S4 = s4_cost_seconds. The time lost
//     between onset and verdict (Event.lost_seconds) counts at once; then every job iteration adds
//     max(0, t − healthy).
//   - COMPUTE: S2 re-balances micro-batches across DP groups from the culprit's slowdown
//     (planner.h: PlanS2); S3 packs the stragglers; S4 restarts without them.
//     COMMUNICATION: S3 remaps so the slow link leaves DP (all-reduce) traffic (PlanS3); S4
//     restarts without one end of it. UNKNOWN: S1, then S4.
//   - A plan that cannot help (no better plan, rejected or timed-out directive, or measured no
//     faster than the slow iteration time) is skipped, and the ladder moves on when the lost time
//     pays for the next level. A plan in force that does not bring the iteration time back keeps
//     adding lost time, so the next level comes in turn.
//   - The plan in force is measured: the median of the iterations since it took effect
//     (Event.mitigated_iteration_time_ns).
//   - While S2 is in force the job's iteration time hides the fault (the slow group runs fewer
//     micro-batches), so the culprit's compute time per micro-batch (IterationSummary.compute_ns
//     / its group's m_i) is compared with its stage peers': once it was seen slow (>= 1 +
//     verification_min_ratio) and then stays within half that for clear_iterations, the event is
//     recovered by the orchestrator (EventActions::RecoverEvent) and the plan reverted.
//   - When the event recovers, S3 and then S2 are reverted (directives with reverts_directive_id:
//     the original layout, the plan before S2). An S4 that applied (or timed out: the ranks exit
//     to restart) closes the event.
//   - Per job: mitigation_enabled (off: nothing new; plans in force are reverted), s2/s3/s4_enabled
//     (disabling a level in force reverts it), dry_run (Actions recorded with dry_run = true,
//     nothing sent, no state change of the job).
// State is per event, in memory; after a controller restart it is rebuilt from the event (its
// lost time and actions) at the next job iteration. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_
#define FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "analysis/clock.h"
#include "analysis/plan/layout.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/mitigation/planner.h"

namespace falcon::analysis {
// From analysis/plan/escalation.h, which only the .cc includes.
enum class Strategy;
struct EscalationOptions;
struct EscalationStep;
}  // namespace falcon::analysis

namespace falcon::controller::mitigation {

struct OrchestratorOptions {
  // S4: checkpoint directory the ranks write to (relative: under the trainer's
  // --checkpoint-dir). Default "falcon-s4".
  std::string checkpoint_dir = "falcon-s4";
  // Iterations measured under a plan before judging it, >= 1. Default 5.
  int measure_iterations = 5;
  // A plan measured at >= this fraction of the slow iteration time did not help. Default 0.97.
  double no_help_fraction = 0.97;
  // Consecutive culprit summaries back at its peers' compute speed that clear a compute
  // fail-slow under S2 (each over a median of the last 5), >= 1. Default 3.
  int clear_iterations = 3;
};

class Orchestrator : public MitigationHook {
 public:
  // `clock` must outlive the orchestrator (the controller's).
  Orchestrator(OrchestratorOptions options, const Clock* clock);
  ~Orchestrator() override;

  void OnVerdict(const falcon::v1::Event& event, EventActions& actions) override;
  void OnJobIteration(const falcon::v1::Event& event, int64_t iteration,
                      absl::Duration iteration_time, EventActions& actions) override;
  void OnRankIteration(const falcon::v1::Event& event, const falcon::v1::IterationSummary& summary,
                       EventActions& actions) override;
  void OnRecovered(const falcon::v1::Event& event, EventActions& actions) override;
  void OnDirectiveState(const falcon::v1::DirectiveRecord& record, EventActions& actions) override;

  // Events with orchestration state (tests).
  size_t active_events() const { return events_.size(); }

 private:
  struct EventState;
  // The culprit `rank`'s compute per micro-batch over the median of its stage peers' (non-culprit
  // ranks of the same pipeline stage); 0 when there are too few samples (culprit >= min_samples,
  // each peer >= 3).
  static double ProbeRatio(const EventState& st, uint32_t rank, size_t min_samples);
  using Steps = std::vector<analysis::EscalationStep>;

  EventState* Start(const falcon::v1::Event& event, EventActions& actions, bool rebuild);
  void Execute(EventState& st, const Steps& steps, EventActions& actions);
  bool ApplyS2(EventState& st, const analysis::EscalationStep& step, EventActions& actions,
               std::string* why_not);
  bool ApplyS3(EventState& st, const analysis::EscalationStep& step, EventActions& actions,
               std::string* why_not);
  void ApplyS4(EventState& st, const analysis::EscalationStep& step, EventActions& actions);
  void Revert(EventState& st, const analysis::EscalationStep& step, EventActions& actions);
  void Skip(EventState& st, analysis::Strategy s, const std::string& why, int64_t iteration,
            EventActions& actions);
  void Record(EventState& st, falcon::v1::Strategy strategy, uint64_t directive_id,
              int64_t iteration, const std::string& reason, bool revert, EventActions& actions);
  analysis::EscalationOptions EscalationOptionsFor(const EffectiveSettings& s) const;

  const OrchestratorOptions options_;
  const Clock* const clock_;
  std::map<uint64_t, std::unique_ptr<EventState>> events_;
  // The layout in force per job after an S3 (the registration may lag behind).
  std::map<std::string, analysis::Layout> layouts_;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_
