// S3, topology change: remaps ranks so slow links leave DP (all-reduce) traffic and slow ranks
// are packed into few stages (planner.h: PlanS3). While it is in force the new layout is the
// job's (EventContext::layouts); reverting restores the layout it replaced. See strategy.h and
// docs/algorithms.md#s3-topology-planner.
#ifndef FALCON_CONTROLLER_MITIGATION_S3_TOPOLOGY_H_
#define FALCON_CONTROLLER_MITIGATION_S3_TOPOLOGY_H_

#include <cstdint>
#include <string>

#include "analysis/plan/layout.h"
#include "controller/mitigation/plan_strategy.h"

namespace falcon::controller::mitigation {

class S3Topology final : public PlanStrategy {
 public:
  analysis::plan::Strategy level() const override { return analysis::plan::Strategy::kS3Topology; }

  // kFailedPrecondition with the reason when the job or its shape is unknown, or no layout is
  // predicted faster.
  absl::StatusOr<PlannedDirective> Plan(const analysis::plan::EscalationStep& step,
                                        EventContext& ctx,
                                        detection::EventActions& actions) override;
  void Restore(uint64_t directive, const JobShape* shape) override;

  // The layout the plan in force replaced.
  const analysis::plan::Layout& before() const { return before_; }

 protected:
  absl::string_view what() const override { return "S3 topology change"; }
  void OnIssued(const PlannedDirective& plan, int64_t effective_iteration,
                EventContext& ctx) override;
  std::string RevertBody(EventContext& ctx, const registry::JobEntry& job,
                         falcon::v1::Directive* directive) override;
  void OnDropped(EventContext& ctx) override;

 private:
  analysis::plan::Layout before_;
  analysis::plan::Layout planned_before_, planned_after_;  // Between Plan and Issue.
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_S3_TOPOLOGY_H_
