// The orchestrator's state of one fail-slow event: what its levels share (EventContext), the
// escalation policy's state machine, and one strategy object per level (S2, S2L, S3, S4). Built
// from the event at its verdict, or rebuilt from the event's log (the plans in force) after a
// controller restart. See orchestrator.h. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_MITIGATION_EVENT_H_
#define FALCON_CONTROLLER_MITIGATION_MITIGATION_EVENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/plan/escalation.h"
#include "common/clock.h"
#include "controller/mitigation/s2_micro_batch.h"
#include "controller/mitigation/s2l_layer_split.h"
#include "controller/mitigation/s3_topology.h"
#include "controller/mitigation/s4_checkpoint_restart.h"
#include "controller/mitigation/strategy.h"

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

class MitigationEvent {
 public:
  // The state of `event` (its escalation not started). `rebuild`: restores the plans in force
  // from the event's actions. Errors: kNotFound for an unknown job; kFailedPrecondition without
  // a healthy iteration time; the escalation's kInvalidArgument for settings out of range.
  // `layouts` and `s2l_measurements` are the orchestrator's (EventContext), outliving the event.
  static absl::StatusOr<std::unique_ptr<MitigationEvent>> Create(
      const falcon::v1::Event& event, detection::EventActions& actions,
      const OrchestratorOptions& options, const common::Clock& clock, LayoutsInForce* layouts,
      S2LMeasurements* s2l_measurements, common::ErrorCounter* errors, bool rebuild);

  EventContext& ctx() { return ctx_; }
  analysis::plan::Escalation& escalation() { return *esc_; }
  S2MicroBatch& s2() { return s2_; }
  S2LLayerSplit& s2l() { return s2l_; }
  S3Topology& s3() { return s3_; }
  S4CheckpointRestart& s4() { return s4_; }

  // Starts the escalation of `event` (the one the state was created from) at ctx().last_iteration;
  // the time lost between onset and verdict (Event.lost_seconds) counts at once. Returns the first
  // steps; the escalation's errors.
  absl::StatusOr<std::vector<analysis::plan::EscalationStep>> StartEscalation(
      const falcon::v1::Event& event);

  // The strategy of level `s` (nullptr for S1).
  MitigationStrategy* Of(analysis::plan::Strategy s);
  // The strategy whose directive in force is `id` (nullptr: none, or id 0).
  MitigationStrategy* WithDirective(uint64_t id);
  // The plan the job runs under (S3 over S2L over S2), whose iteration time is measured; nullptr:
  // none.
  MitigationStrategy* PlanInForce();
  // The escalation's options now: the job's settings (escalation_settings.h) with what S2L's
  // cost needs of the job and its plan (S2LLayerSplit::CostInputs).
  analysis::plan::EscalationOptions EscalationOptionsNow(detection::EventActions& actions);
  // Sets Event.ceiling to the ceiling of the plan in force (PlanInForce), or clears it when none
  // is in force or its ceiling is unknown (rebuilt after a restart); only when the plan in force
  // or its ceiling changed since the last call (after a rebuild the event keeps the ceiling it
  // has until then). With no plan in force the event keeps the ceiling it has (a revert leaves
  // the ceiling of the plan it reverted: the event's last plan, whose mitigated iteration time
  // the event keeps too), unless `clear_without_plan` (a plan rejected or timed out: never in
  // force). Nothing while rebuilding. A failed call is logged and counted at
  // "mitigation_set_ceiling".
  void SyncCeiling(detection::EventActions& actions, bool clear_without_plan = false);

  // The escalation ended (kEnd); the state is dropped unless an S4 waits for its directive.
  void set_ended() { ended_ = true; }
  // The event cleared: its ceiling stays that of the plan in force when it did (the one its
  // mitigated iteration time was measured under), through the reverts that follow.
  void FreezeCeiling() { ceiling_frozen_ = true; }

  // A first S2 (or S2L) plan of a compute culprit waiting for the compute probe to measure the
  // culprit (Orchestrator::S2Ready): the escalation's step, and the job iteration the event began
  // waiting at (the first wait; a later one does not wait longer).
  std::optional<analysis::plan::EscalationStep> waiting_s2;
  std::optional<analysis::plan::EscalationStep> waiting_s2l;
  int64_t waiting_s2_since = -1;
  // The slot of `s` (S2 or S2L; S2's for any other).
  std::optional<analysis::plan::EscalationStep>& Waiting(analysis::plan::Strategy s) {
    return s == analysis::plan::Strategy::kS2LLayerSplit ? waiting_s2l : waiting_s2;
  }
  bool ended() const { return ended_; }
  bool Done() const { return ended_ && s4_.directive() == 0; }

  struct Recovery {
    int64_t iteration = 0;
    uint32_t rank = 0;
    double ratio = 0;
    std::string reason;
  };
  // One rank's summary for the compute probe (compute culprits only), per block of the split in
  // force (Job.layer_split). Before S2 (or S2L) it samples the stage slowdown; before a plan and
  // under it (from two iterations after it took effect) it returns
  // the recovery once the culprit is back at its peers' speed (ComputeProbe::State::kCleared;
  // seen slow by the probe or by the verdict). Before S2 that matters when load from outside the
  // job keeps the iteration time above its healthy level after the fault cleared: the job's
  // series then shows no recovery (seen: a short CPU-quota fault localized from profiling, the
  // event LOCALIZED for good).
  std::optional<Recovery> ProbeRank(const falcon::v1::IterationSummary& summary,
                                    detection::EventActions& actions);
  // Why a recovery of `event`'s series is no sign the fail-slow is gone; nullopt when it is one.
  //  - Compute culprits, by the compute probe: the worst culprit's compute per micro-batch over
  //    its last ComputeProbe::kWindow summaries is at least 1 + verification_min_ratio of its
  //    stage peers'. ProbeRank recovers the event once the culprit clears (the job series, which
  //    learned the faster level, no longer can).
  //  - Communication culprits with S3 in force: the new layout keeps the job's traffic off the
  //    slow links, so the job's iteration time cannot show them recover. When the plan already
  //    runs the job within verification_min_ratio of its healthy time
  //    (Event.mitigated_iteration_time_ns against healthy_iteration_time_ns), being back at the
  //    healthy level is the plan's doing and the plan stays; when it left a slowdown, a return to
  //    healthy is faster than the plan, so the links recovered.
  std::optional<std::string> StillSlow(const falcon::v1::Event& event,
                                       detection::EventActions& actions);

 private:
  MitigationEvent(uint64_t event_id, std::string job, Culprit culprit,
                  const OrchestratorOptions& options);

  EventContext ctx_;
  std::optional<analysis::plan::Escalation> esc_;
  S2MicroBatch s2_;
  S2LLayerSplit s2l_;
  S3Topology s3_;
  S4CheckpointRestart s4_;
  bool ended_ = false;
  bool ceiling_frozen_ = false;
  // The plan in force's directive and ceiling (empty: none or unknown), serialized into `want`'s
  // key; SyncCeiling writes when it changes.
  std::string CeilingKey(falcon::v1::PlanCeiling* want);
  std::optional<std::string> synced_ceiling_;  // CeilingKey as SyncCeiling last set it.
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_MITIGATION_EVENT_H_
