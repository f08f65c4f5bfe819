// The extension point for mitigation (S1-S4 with escalation; docs/algorithms.md#escalation).
// The detection pipeline ends at a verdict; a MitigationHook takes it from there through
// EventActions, which the controller implements. Every hook call runs inside the controller's
// current unit of work: what the hook stages through EventActions (actions, transitions,
// directives) is stored atomically with the change that triggered the call, and nothing the hook
// sends leaves before that commit. Hooks run on the controller loop and must not block.
#ifndef FALCON_CONTROLLER_DETECTION_MITIGATION_HOOK_H_
#define FALCON_CONTROLLER_DETECTION_MITIGATION_HOOK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/error_counter.h"
#include "controller/registry/job_registry.h"
#include "controller/settings/settings_manager.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::detection {

// What a mitigation strategy may read and do. Errors: kNotFound for an unknown event or job;
// kFailedPrecondition when the event is not in a state that allows the call.
class EventActions {
 public:
  virtual ~EventActions() = default;

  virtual absl::Time Now() const = 0;
  virtual const falcon::v1::Event* FindEvent(uint64_t event_id) const = 0;
  virtual const registry::JobEntry* FindJob(const std::string& job) const = 0;
  virtual settings::EffectiveSettings Settings(const std::string& job) const = 0;
  // The job's latest completed iteration (-1 none) and its iteration time.
  virtual int64_t LastIteration(const std::string& job) const = 0;
  // Whether the job's workload imbalance (docs/algorithms.md#workload-imbalance) explains
  // `rank`'s slowness since `since_iteration`, so that no strategy should act against it; `why`
  // says how. False by default (no imbalance tracked).
  virtual bool IsBlameless(const std::string& /*job*/, uint32_t /*rank*/,
                           int64_t /*since_iteration*/, std::string* /*why*/) const {
    return false;
  }

  // Appends `action` to the event's log (Event.actions). Active events, and recovered ones (the
  // reverts that follow a recovery).
  virtual absl::Status RecordAction(uint64_t event_id, const falcon::v1::Action& action) = 0;
  // LOCALIZED or MITIGATING -> MITIGATING (a new level), and the job to JOB_STATE_MITIGATING.
  virtual absl::Status MarkMitigating(uint64_t event_id, const std::string& reason) = 0;
  // Sets Event.mitigated_iteration_time_ns (measured under the plan in force).
  virtual absl::Status SetMitigatedIterationTime(uint64_t event_id, absl::Duration time) = 0;
  // Issues `directive` for the event's job through the directive protocol
  // (core/directive_issuer.h): id, job and epoch are filled in (S3/S4 bump the epoch), a plan's
  // effective iteration is raised ahead of every rank's progress; stored PENDING, sent after the
  // commit, re-delivered until acked. `rollback` (may be null): what the ranks that applied it
  // get should another target reject it. Returns the directive id.
  virtual absl::StatusOr<uint64_t> IssueDirective(uint64_t event_id,
                                                  falcon::v1::Directive directive,
                                                  const falcon::v1::Directive* rollback) = 0;
  // A directive's record (nullptr: unknown id).
  virtual const falcon::v1::DirectiveRecord* FindDirective(uint64_t directive_id) const = 0;
  // The earliest effective iteration a plan directive issued now gets.
  virtual int64_t NextEffectiveIteration(const std::string& job) const = 0;
  // Records the plan in force for the job (Job.plan_version, Job.micro_batches and the layer
  // split Job.layer_split, per DP index; empty: every pipeline split evenly).
  virtual absl::Status SetJobPlan(
      const std::string& job, int64_t plan_version, const std::vector<uint32_t>& micro_batches,
      const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) = 0;
  // Sets Event.ceiling, what the cost model predicts for the plan in force; an empty ceiling
  // (strategy unset) clears it (no plan in force). Active events, and recovered ones (the reverts
  // that follow a recovery).
  virtual absl::Status SetPlanCeiling(uint64_t event_id,
                                      const falcon::v1::PlanCeiling& ceiling) = 0;
  // -> CLOSED (e.g. the job restarted without the bad ranks).
  virtual absl::Status CloseEvent(uint64_t event_id, const std::string& reason) = 0;
  // -> RECOVERED at `iteration`: the hook saw the fail-slow clear where the detector cannot (a
  // plan in force hides it from the job's iteration time). The controller does not call
  // OnRecovered for it: the hook reverts its plans itself.
  virtual absl::Status RecoverEvent(uint64_t event_id, int64_t iteration,
                                    const std::string& reason) = 0;
};

class MitigationHook {
 public:
  virtual ~MitigationHook() = default;
  // Where the hook counts the errors it handles by logging and going on: the controller that
  // runs the hook passes its metrics (falcon_controller_errors_total{where}) once, before any
  // other call. `errors` outlives the hook's use of it.
  virtual void SetErrorCounter(common::ErrorCounter* /*errors*/) {}
  // The verdict was just staged (event LOCALIZED); called only when the job's
  // mitigation_enabled setting is on.
  virtual void OnVerdict(const falcon::v1::Event& event, EventActions& actions) = 0;
  // A job iteration completed while the job has an active event (for lost-time escalation and
  // measuring the plan in force).
  virtual void OnJobIteration(const falcon::v1::Event& /*event*/, int64_t /*iteration*/,
                              absl::Duration /*iteration_time*/, EventActions& /*actions*/) {}
  // One rank's iteration summary while the job has an active event (per-rank signals such as
  // compute time per micro-batch, which a plan in force does not hide).
  virtual void OnRankIteration(const falcon::v1::Event& /*event*/,
                               const falcon::v1::IterationSummary& /*summary*/,
                               EventActions& /*actions*/) {}
  // Whether the hook's own per-rank evidence (e.g. the compute probe's culprit against its stage
  // peers) says the event's fail-slow is still there. A recovery seen on the job's iteration
  // time is then not accepted: an outside speed-up (a burst of load on the machine ending) can
  // lower the iteration time while the culprit stays slow. Returns why, or nullopt when the hook
  // has no such evidence. Reads only: stages nothing through `actions`.
  virtual std::optional<std::string> StillSlow(const falcon::v1::Event& /*event*/,
                                               EventActions& /*actions*/) {
    return std::nullopt;
  }
  // The event recovered: revert S2/S3 plans.
  virtual void OnRecovered(const falcon::v1::Event& /*event*/, EventActions& /*actions*/) {}
  // A directive tied to an event changed state (APPLIED, REJECTED or TIMED_OUT).
  virtual void OnDirectiveState(const falcon::v1::DirectiveRecord& /*record*/,
                                EventActions& /*actions*/) {}
  // Periodically (the controller's tick), for timeouts.
  virtual void Tick(absl::Time /*now*/, EventActions& /*actions*/) {}
  // DryRunPlan for the active `event` as the hook plans it now: the escalation ladder (steps
  // taken with their iterations, steps to come with the iteration the lost time pays for them)
  // and the plans computed as its strategies compute them. Reads only: stages nothing through
  // `actions`. kNotFound when the hook holds no state for the event (no verdict yet, mitigation
  // off for the job); kUnimplemented by default.
  virtual absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRun(const falcon::v1::Event& /*event*/,
                                                                EventActions& /*actions*/) {
    return absl::UnimplementedError("this mitigation hook does not plan dry runs");
  }
  // The job ended a retention period ago and was purged with its events and directives: forget
  // whatever is kept for it.
  virtual void OnJobPurged(const std::string& /*job*/) {}
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_MITIGATION_HOOK_H_
