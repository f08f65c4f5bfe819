#include "controller/mitigation/s3_topology.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

absl::StatusOr<PlannedDirective> S3Topology::Plan(const analysis::plan::EscalationStep& step,
                                                  EventContext& ctx,
                                                  detection::EventActions& actions) {
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) return absl::FailedPreconditionError("job unknown");
  absl::StatusOr<JobShape> shape = ctx.Shape(*job, {});
  if (!shape.ok()) return absl::FailedPreconditionError(shape.status().message());
  absl::StatusOr<S3Plan> plan = PlanS3(*shape, ctx.culprit, ctx.healthy, ctx.other_culprits);
  if (!plan.ok()) return absl::FailedPreconditionError(plan.status().message());
  LOG(INFO) << "S3 plan computed " << ctx.Subject()
            << " predicted_s=" << absl::ToDoubleSeconds(plan->predicted)
            << " current_s=" << absl::ToDoubleSeconds(plan->predicted_current)
            << " improves=" << plan->improves << " plan=\"" << plan->summary << "\"";
  if (!plan->improves) {
    return absl::FailedPreconditionError(absl::StrCat("no better layout: ", plan->summary));
  }
  PlannedDirective out;
  out.summary = plan->summary;
  out.ceiling = plan->ceiling;
  const int64_t version = job->job().plan_version() + 1;
  out.directive.set_reason(absl::StrCat(step.reason, "; ", plan->summary));
  out.directive.set_plan_version(version);
  *out.directive.mutable_topology_change() = plan->change;
  falcon::v1::Directive& rollback = out.rollback.emplace();
  rollback.set_plan_version(version + 1);
  *rollback.mutable_topology_change() = ToTopologyChange(shape->layout);
  planned_before_ = shape->layout;
  planned_after_ = plan->layout;
  return out;
}

void S3Topology::OnIssued(const PlannedDirective& /*plan*/, int64_t effective_iteration,
                          EventContext& ctx) {
  before_ = planned_before_;
  ctx.peer_level_before_plan = 0;  // Ranks move: no peer level to compare across the plan.
  if (ctx.layouts != nullptr) (*ctx.layouts)[ctx.job] = planned_after_;
  ctx.measurement.Restart(effective_iteration);
}

std::string S3Topology::RevertBody(EventContext& /*ctx*/, const registry::JobEntry& /*job*/,
                                   falcon::v1::Directive* directive) {
  *directive->mutable_topology_change() = ToTopologyChange(before_);
  return "original layout";
}

void S3Topology::OnDropped(EventContext& ctx) {
  if (ctx.layouts != nullptr) ctx.layouts->erase(ctx.job);
}

void S3Topology::Restore(uint64_t directive, const JobShape* shape) {
  MitigationStrategy::Restore(directive, shape);
  if (shape != nullptr) before_ = shape->layout;
}

}  // namespace falcon::controller::mitigation
