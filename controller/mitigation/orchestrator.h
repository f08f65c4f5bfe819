// Mitigation orchestration (docs/algorithms.md#escalation): a MitigationHook that takes a verdict
// through the escalation ladder S1 → S2 → S2L → S3 → S4 and acts through the controller's
// directive protocol. A thin coordinator: per event it drives
//   - the escalation policy (analysis/plan/escalation.h, ski rental: a level is bought once the
//     time already lost reaches its cost; inputs from the job's settings: escalation_settings.h),
//     fed with the time lost between onset and verdict (Event.lost_seconds) at once and then
//     max(0, t − healthy) per job iteration;
//   - one strategy object per level (strategy.h: S2 s2_micro_batch.h, S2L s2l_layer_split.h, S3
//     s3_topology.h, S4 s4_checkpoint_restart.h) that plans, issues, measures and reverts;
//   - the compute probe (compute_probe.h), which tells when a compute fail-slow hidden by S2
//     cleared: the orchestrator then recovers the event (EventActions::RecoverEvent) and reverts.
// The mechanics around the policy:
//   - A level that cannot help (no better plan, a rejected or timed-out directive, or a plan
//     measured no faster than the slow iteration time: plan_measurement.h) is reverted if in force
//     and skipped; the ladder moves on when the lost time pays for the next level.
//   - When the event recovers, S3, S2L and then S2 are reverted. An S4 that applied (or timed
//     out: the ranks exit to restart) closes the event.
//   - S2L carries its own micro-batch plan: S2 is skipped while it is in force, and an S2 reverted
//     under it hands what it replaced over to S2L's revert. S2L's cost uses the pause beside the
//     move and the bandwidth its last APPLIED layer split measured in the job (S2LMeasurementOf its
//     acks' "bytes_moved=", "move_s=" and "pause_s="), else the s2l_pause_seconds and
//     s2l_bandwidth_bytes_per_s settings.
//   - Event.ceiling follows the plan in force (MitigationEvent::SyncCeiling): set when a plan is
//     issued, the remaining plan's when one is reverted (the reverted one's when none remains),
//     cleared only by a plan rejected or timed out with none in force; frozen once the event
//     clears (the ceiling of the plan its mitigated time was measured under).
//   - S2L is not shared between concurrent events of a job: an event's S2L is skipped while
//     another event of the job has S2 or S2L in force, its S2 while another has S2L.
//   - Concurrent events of a job (docs/algorithms.md#concurrent-events): each has its own ladder;
//     S2 and S3 plan for the culprits of every active event of the job (one S2 plan for every slow
//     DP group, an S3 layout that avoids every known slow link). An event whose S2 ends while
//     another still has S2 in force hands the plan over: that one plans again for the culprits
//     still active.
//   - Per job: mitigation_enabled (off: nothing new; plans in force are reverted), s2/s3/s4_enabled
//     (disabling a level in force reverts it), dry_run (actions recorded with dry_run = true,
//     nothing sent, no state change of the job).
// Errors of the controller's calls that are handled by going on are logged and counted
// (falcon_controller_errors_total{where="mitigation_..."}).
// State is per event, in memory; after a controller restart it is rebuilt from the event (its lost
// time and actions) at the next job iteration. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_
#define FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/error_counter.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/mitigation/mitigation_event.h"
#include "controller/mitigation/strategy.h"

namespace falcon::controller::mitigation {

class Orchestrator : public detection::MitigationHook {
 public:
  // Job iterations a first S2 (or S2L) plan of a compute culprit waits for the compute probe
  // (S2Ready).
  static constexpr int64_t kS2ProbeWaitIterations = 8;

  // `clock` must outlive the orchestrator (the controller's).
  Orchestrator(OrchestratorOptions options, const common::Clock* clock);
  ~Orchestrator() override;

  // Handled errors count here (the controller's metrics); until called they are only logged.
  void SetErrorCounter(common::ErrorCounter* errors) override;

  void OnVerdict(const falcon::v1::Event& event, detection::EventActions& actions) override;
  void OnJobIteration(const falcon::v1::Event& event, int64_t iteration,
                      absl::Duration iteration_time, detection::EventActions& actions) override;
  void OnRankIteration(const falcon::v1::Event& event, const falcon::v1::IterationSummary& summary,
                       detection::EventActions& actions) override;
  std::optional<std::string> StillSlow(const falcon::v1::Event& event,
                                       detection::EventActions& actions) override;
  void OnRecovered(const falcon::v1::Event& event, detection::EventActions& actions) override;
  void OnDirectiveState(const falcon::v1::DirectiveRecord& record,
                        detection::EventActions& actions) override;
  // The ladder of the event's escalation (applied and skipped levels at their iterations, the
  // rest projected from the lost time), S2 planned as S2 plans (SizingCulprit, from the plan an
  // S2 in force replaced), S3 from the layout in force.
  absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRun(const falcon::v1::Event& event,
                                                        detection::EventActions& actions) override;
  void OnJobPurged(const std::string& job) override;

  // Events with orchestration state (tests).
  size_t active_events() const { return events_.size(); }

 private:
  using Steps = std::vector<analysis::plan::EscalationStep>;

  MitigationEvent* Start(const falcon::v1::Event& event, detection::EventActions& actions,
                         bool rebuild);
  // Acts on the policy's steps; `steps` not ok: logged and counted at `where`.
  void Execute(MitigationEvent& e, const absl::StatusOr<Steps>& steps, absl::string_view where,
               detection::EventActions& actions);
  void Apply(MitigationEvent& e, const analysis::plan::EscalationStep& step,
             detection::EventActions& actions);
  // Whether S2 (or S2L, `step`'s level) may plan now. A first S2 plan of a compute culprit is
  // sized from the compute probe (the culprit's compute per micro-batch in training): until the
  // probe has measured it (S2MicroBatch::ProbeMeasured), the step waits in e.Waiting(level),
  // retried at each job iteration, for up to kS2ProbeWaitIterations since the event's first such
  // wait; then the localization's measurement sizes it.
  bool S2Ready(MitigationEvent& e, const analysis::plan::EscalationStep& step);
  // Whether e's waiting S2 step may plan at `iteration`: the probe measured the culprit, or the
  // step waited kS2ProbeWaitIterations since e.waiting_s2_since.
  static bool S2WaitOver(MitigationEvent& e, int64_t iteration);
  void Skip(MitigationEvent& e, analysis::plan::Strategy s, const std::string& why,
            int64_t iteration, detection::EventActions& actions);
  // Sets e's view of the job's other events (EventContext::other_culprits, other_s2_before),
  // leaving out `leaving` (0: none).
  void SetOthers(MitigationEvent& e, uint64_t leaving);
  // Reverts level `s` of `e`, or hands a joint S2 plan over to another event of the job that
  // still has S2 in force (it plans again without e's culprit).
  void RevertLevel(MitigationEvent& e, MitigationStrategy* s,
                   const analysis::plan::EscalationStep& step, detection::EventActions& actions);
  // A layer split directive APPLIED: what its acks measured (S2LMeasurementOf) becomes the job's
  // S2L pause and bandwidth; a malformed figure is logged and counted at "mitigation_s2l_pause"
  // and its ack left out.
  void RecordS2LMeasurement(const falcon::v1::DirectiveRecord& record);

  const OrchestratorOptions options_;
  const common::Clock* const clock_;
  common::NullErrorCounter no_errors_;
  common::ErrorCounter* errors_ = &no_errors_;
  std::map<uint64_t, std::unique_ptr<MitigationEvent>> events_;
  // Events whose mitigation could not start, with the error last logged for each.
  std::map<uint64_t, std::string> not_started_;
  LayoutsInForce layouts_;
  S2LMeasurements s2l_measurements_;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_ORCHESTRATOR_H_
