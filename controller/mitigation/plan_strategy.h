// What S2 (micro-batch plan), S2L (layer split) and S3 (topology change) share: a plan that stays
// in force until it is reverted with a directive that names it (reverts_directive_id) and restores
// what it replaced, and that is dropped when its directive is rejected or times out. See
// strategy.h.
#ifndef FALCON_CONTROLLER_MITIGATION_PLAN_STRATEGY_H_
#define FALCON_CONTROLLER_MITIGATION_PLAN_STRATEGY_H_

#include <string>

#include "controller/mitigation/strategy.h"

namespace falcon::controller::mitigation {

class PlanStrategy : public MitigationStrategy {
 public:
  void Revert(const analysis::plan::EscalationStep& step, EventContext& ctx,
              detection::EventActions& actions) override;
  // REJECTED or TIMED_OUT: the plan is not in force; the caller skips the level. Never ends the
  // event.
  bool OnDirectiveState(const falcon::v1::DirectiveRecord& record, EventContext& ctx,
                        detection::EventActions& actions) override;

 protected:
  // Fills the revert directive's body (what the plan replaced); returns it for the reason.
  virtual std::string RevertBody(EventContext& ctx, const registry::JobEntry& job,
                                 falcon::v1::Directive* directive) = 0;
  // The plan is no longer in force (reverted or failed).
  virtual void OnDropped(EventContext& /*ctx*/) {}
};

// A plan directive (micro-batch plan, layer split, topology change or checkpoint restart) was
// APPLIED (or, a checkpoint restart, timed out: its ranks exit to restart all the same): records
// the job's plan in force (Job.plan_version, Job.micro_batches, Job.layer_split: a layer split sets
// both, an even one clears the split; a micro-batch plan keeps the split, a topology change both; a
// checkpoint restart clears both, as the restarted job runs its new, smaller shape even). A store
// error is logged and counted at "mitigation_set_job_plan".
void RecordPlanInForce(const falcon::v1::DirectiveRecord& record, detection::EventActions& actions,
                       common::ErrorCounter& errors);

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_PLAN_STRATEGY_H_
