// S2, micro-batch rebalance for compute fail-slows: fewer micro-batches for the DP group of the
// slow rank, more for the others (planner.h: PlanS2, fed with the culprit's stage slowdown as the
// compute probe measured it, and with the culprits of the job's other active events: one plan for
// every slow DP group, docs/algorithms.md#concurrent-events). Reverting restores the plan in force
// before it (the even split when the job had none); the orchestrator hands a joint plan over to
// another event instead while that one still needs it. See strategy.h and
// docs/algorithms.md#s2-micro-batch-solver.
#ifndef FALCON_CONTROLLER_MITIGATION_S2_MICRO_BATCH_H_
#define FALCON_CONTROLLER_MITIGATION_S2_MICRO_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "controller/mitigation/plan_strategy.h"

namespace falcon::controller::mitigation {

class S2MicroBatch final : public PlanStrategy {
 public:
  analysis::plan::Strategy level() const override {
    return analysis::plan::Strategy::kS2MicroBatch;
  }

  // kFailedPrecondition with the reason when the job is unknown, the cause is not compute, the
  // shape is unknown, or no plan is predicted faster than the one in force.
  absl::StatusOr<PlannedDirective> Plan(const analysis::plan::EscalationStep& step,
                                        EventContext& ctx,
                                        detection::EventActions& actions) override;
  void Restore(uint64_t directive, const JobShape* shape) override;

  // The micro-batches per DP index the plan in force replaced.
  const std::vector<uint32_t>& before() const { return before_; }

  // What S2 sizes its plan for: the event's culprit with the stage slowdown the compute probe
  // measured (the worst culprit's, when it has one; before the plan in force, while the probe
  // starts over under it: EventContext::probe_ratio_before_plan); for a compute culprit, the
  // localization's measurement (EventContext::validation_ratio) until the probe has one, never
  // once it has; else the job's ratio. `from` (optional) receives "probe", "validation" or
  // "job_ratio".
  static Culprit SizingCulprit(const EventContext& ctx, std::string* from = nullptr);
  // Summaries per culprit (and per peer) the compute probe needs before it sizes a plan.
  static constexpr size_t kProbeSamples = 3;
  // The compute probe's worst culprit ratio (now; else before the plan in force; 0: never
  // measured).
  static double ProbeRatio(const EventContext& ctx);
  // Whether the compute probe has measured the culprit (ProbeRatio > 0).
  static bool ProbeMeasured(const EventContext& ctx);
  // The micro-batches S2 plans from: those its plan in force replaced, else those another event's
  // S2 in force replaced (ctx.other_s2_before), else the job's in force.
  std::vector<uint32_t> PlanBase(const registry::JobEntry& job, const EventContext& ctx) const;

 protected:
  absl::string_view what() const override { return "S2 micro-batch plan"; }
  void OnIssued(const PlannedDirective& plan, int64_t effective_iteration,
                EventContext& ctx) override;
  std::string RevertBody(EventContext& ctx, const registry::JobEntry& job,
                         falcon::v1::Directive* directive) override;

 private:
  std::vector<uint32_t> before_;
  std::vector<uint32_t> planned_before_;  // Between Plan and Issue.
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_S2_MICRO_BATCH_H_
