// One mitigation strategy (S2 micro-batch rebalance, S2L layer split, S3 topology change, S4
// checkpoint-restart) behind one interface: Plan computes the directive for the event, Issue sends
// it through the controller's directive protocol (or, under dry run, records it without sending),
// Measure judges the job under the plan in force, Revert undoes it. Each strategy object belongs to
// one event and keeps that event's state of its level (the directive in force, what it replaced).
// What the levels share about the event lives in EventContext. The escalation policy (when to try
// which level; analysis/plan/escalation.h) stays with the caller (orchestrator.h). See
// docs/algorithms.md#strategies. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_STRATEGY_H_
#define FALCON_CONTROLLER_MITIGATION_STRATEGY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/plan/escalation.h"
#include "analysis/plan/layout.h"
#include "common/error_counter.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/mitigation/compute_probe.h"
#include "controller/mitigation/plan_measurement.h"
#include "controller/mitigation/planner.h"

namespace falcon::controller::mitigation {

// The layout in force per job after an S3 (the registration may lag behind); shared by the
// events of the orchestrator.
using LayoutsInForce = std::map<std::string, analysis::plan::Layout>;
// What the last S2L layer split applied in a job measured (its APPLIED acks: S2LMeasurementOf),
// and that split's directive (the newest wins when a restarted controller rebuilds them).
struct S2LMeasured {
  analysis::plan::S2LMeasurement measurement;
  uint64_t directive_id = 0;
};
// Per job: S2L's cost in the job from then on; shared by the events of the orchestrator.
using S2LMeasurements = std::map<std::string, S2LMeasured>;

// What the levels of one event share.
struct EventContext {
  EventContext(uint64_t event_id, std::string job, Culprit culprit, int measure_iterations,
               double no_help_fraction, int clear_iterations);

  const uint64_t event_id;
  const std::string job;
  Culprit culprit;         // slowdown_ratio = slow / healthy.
  absl::Duration healthy;  // The event's healthy and slow job iteration times.
  absl::Duration slow;
  int64_t last_iteration = -1;  // The latest job iteration seen.
  bool rebuilding = false;      // Replaying the event's log: record nothing.
  PlanMeasurement measurement;  // The job under the plan in force.
  ComputeProbe probe;           // Compute culprits only.
  LayoutsInForce* layouts = nullptr;
  S2LMeasurements* s2l_measurements = nullptr;
  common::ErrorCounter* errors = nullptr;
  // The job's other active events with a verdict, as the orchestrator set them before this event's
  // latest plan (docs/algorithms.md#concurrent-events): their culprits, sized as S2 sizes them
  // (S2 and S3 plan for every one of them), and the split an S2 plan of theirs in force replaced
  // (empty: none; S2 then plans from it).
  std::vector<Culprit> other_culprits;
  std::vector<uint32_t> other_s2_before;
  // Event.validation_ratio: the culprit's slowdown as validation measured it (0 none).
  double validation_ratio = 0;
  // ComputeProbe::PeerLevel when the S2 plan in force was issued (0: none measured, or S3).
  double peer_level_before_plan = 0;
  // ComputeProbe::WorstCulpritRatio(S2MicroBatch::kProbeSamples) when the S2 plan in force was
  // issued (0: none measured):
  // the probe starts over under the plan, and until it measures again this sizes the culprit
  // (S2MicroBatch::SizingCulprit; a joint plan of another event).
  double probe_ratio_before_plan = 0;

  // "job=<job> event=<id> rank=<r>[,<r>...]", "... link=<a>-><b>[,...]" or, for culprit nodes,
  // "... node=<n>[,...] links=<count of evidence links>", for log lines.
  std::string Subject() const;
  // The job's shape with the layout in force and `micro_batches` (see ShapeOf).
  absl::StatusOr<JobShape> Shape(const registry::JobEntry& job,
                                 const std::vector<uint32_t>& micro_batches) const;
  // Appends an action to the event's log (nothing while rebuilding); dry_run is set for a
  // strategy above S1 recorded without a directive while the job's dry_run setting is on.
  void Record(detection::EventActions& actions, falcon::v1::Strategy strategy,
              uint64_t directive_id, int64_t iteration, const std::string& reason, bool revert);
  // A failed call whose failure is handled by going on: logs a warning and counts it at `where`.
  void CountError(absl::string_view where, const absl::Status& status) const;
  // kFailedPrecondition (the strategy is skipped with that reason) when the job's workload
  // imbalance explains a compute culprit's slowness since the event's onset
  // (EventActions::IsBlameless): S2 and S4 never act against such a rank.
  absl::Status CheckNotImbalance(const detection::EventActions& actions) const;
};

// "s1", "s2", "s2l", "s3", "s4" (as the controller's metrics label directives).
absl::string_view ShortName(analysis::plan::Strategy strategy);

// A directive planned, not yet issued.
struct PlannedDirective {
  falcon::v1::Directive directive;  // Body, reason and plan version; id and epoch on issue.
  std::optional<falcon::v1::Directive> rollback;
  std::string summary;  // The plan, for humans: "m = [6, 10, 8, 8] (was [8, 8, 8, 8])".
  // What the cost model predicts for the plan (Event.ceiling while it is in force); nullopt when
  // it cannot say (S4, or a model that refused the job).
  std::optional<falcon::v1::PlanCeiling> ceiling;
};

class MitigationStrategy {
 public:
  virtual ~MitigationStrategy() = default;

  virtual analysis::plan::Strategy level() const = 0;
  // The directive in force (0: none).
  uint64_t directive() const { return directive_; }
  // The ceiling of the plan in force (PlannedDirective::ceiling when issued; nullopt when none is
  // in force, or after a controller restart rebuilt it).
  const std::optional<falcon::v1::PlanCeiling>& ceiling() const { return ceiling_; }

  // The directive for `step` (an kApply of this level), or why the level cannot help now.
  virtual absl::StatusOr<PlannedDirective> Plan(const analysis::plan::EscalationStep& step,
                                                EventContext& ctx,
                                                detection::EventActions& actions) = 0;
  // Issues `plan`; under dry run records it without sending. Errors: the directive protocol's.
  absl::Status Issue(const analysis::plan::EscalationStep& step, const PlannedDirective& plan,
                     EventContext& ctx, detection::EventActions& actions);
  // One job iteration under this level's plan in force; returns why it did not help when the
  // measurement judges so (the caller then reverts and skips the level).
  virtual std::optional<std::string> Measure(int64_t iteration, absl::Duration iteration_time,
                                             EventContext& ctx, detection::EventActions& actions);
  // Undoes the plan in force (a dry-run plan: records the revert). No-op when none.
  virtual void Revert(const analysis::plan::EscalationStep& step, EventContext& ctx,
                      detection::EventActions& actions) = 0;
  // This level's directive `record` reached a final state. Returns true when the event ended.
  virtual bool OnDirectiveState(const falcon::v1::DirectiveRecord& record, EventContext& ctx,
                                detection::EventActions& actions) = 0;
  // After a controller restart: `directive` is in force (0 none); `shape`: the job's registered
  // shape (null when unknown), what a plan in force replaced.
  virtual void Restore(uint64_t directive, const JobShape* shape);
  // Another level superseded this one (S4 restarts the job): nothing is in force any more.
  void Supersede() {
    directive_ = 0;
    ceiling_.reset();
  }

 protected:
  // "S2 micro-batch plan", for the event's transition reason.
  virtual absl::string_view what() const = 0;
  // The directive took effect at `effective_iteration` (not under dry run).
  virtual void OnIssued(const PlannedDirective& plan, int64_t effective_iteration,
                        EventContext& ctx) = 0;

  uint64_t directive_ = 0;
  std::optional<falcon::v1::PlanCeiling> ceiling_;
  bool dry_ = false;  // A dry-run plan recorded and not reverted.
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_STRATEGY_H_
