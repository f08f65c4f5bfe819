#include "controller/mitigation/s2_micro_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

absl::StatusOr<PlannedDirective> S2MicroBatch::Plan(const analysis::plan::EscalationStep& step,
                                                    EventContext& ctx,
                                                    detection::EventActions& actions) {
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) return absl::FailedPreconditionError("job unknown");
  if (ctx.culprit.cause != falcon::v1::CAUSE_COMPUTE) {
    return absl::FailedPreconditionError("S2 helps compute fail-slows only");
  }
  if (absl::Status s = ctx.CheckNotImbalance(actions); !s.ok()) return s;
  // The probe measures the culprit no slower than its stage peers: the fault is gone or was
  // never in training's own compute (a GEMM can overstate it), so no group needs fewer.
  if (const double probe = ProbeRatio(ctx); probe > 0 && probe <= 1.0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the compute probe measures the culprit at x%.2f of its stage peers' compute per "
        "micro-batch: no slow group to plan for",
        probe));
  }
  absl::StatusOr<JobShape> shape = ctx.Shape(*job, PlanBase(*job, ctx));
  if (!shape.ok()) return absl::FailedPreconditionError(shape.status().message());
  std::string sized_from;
  absl::StatusOr<S2Plan> plan =
      PlanS2(*shape, SizingCulprit(ctx, &sized_from), ctx.healthy, ctx.other_culprits);
  if (!plan.ok()) return absl::FailedPreconditionError(plan.status().message());
  LOG(INFO) << "S2 plan computed " << ctx.Subject() << " micro_batches=["
            << absl::StrJoin(plan->micro_batches, ",") << "] was=["
            << absl::StrJoin(shape->micro_batches, ",")
            << "] stage_slowdown=" << absl::StrFormat("%.2f", plan->stage_slowdown)
            << " stage_slowdown_from=" << sized_from
            << " predicted_s=" << absl::ToDoubleSeconds(plan->predicted)
            << " current_s=" << absl::ToDoubleSeconds(plan->predicted_current)
            << " improves=" << plan->improves;
  if (!plan->improves) {
    return absl::FailedPreconditionError(
        absl::StrCat("no better micro-batch plan: ", plan->summary));
  }
  PlannedDirective out;
  out.summary = plan->summary;
  out.ceiling = plan->ceiling;
  const int64_t version = job->job().plan_version() + 1;
  out.directive.set_reason(absl::StrCat(step.reason, "; ", plan->summary));
  out.directive.set_plan_version(version);
  for (uint32_t m : plan->micro_batches)
    out.directive.mutable_micro_batch_plan()->add_micro_batches(m);
  // The rollback restores the plan in force (another event's joint plan, when there is one).
  std::vector<uint32_t> in_force(job->job().micro_batches().begin(),
                                 job->job().micro_batches().end());
  if (in_force.size() != shape->micro_batches.size()) in_force = shape->micro_batches;
  falcon::v1::Directive& rollback = out.rollback.emplace();
  rollback.set_plan_version(version + 1);
  for (uint32_t m : in_force) rollback.mutable_micro_batch_plan()->add_micro_batches(m);
  planned_before_ = shape->micro_batches;
  return out;
}

Culprit S2MicroBatch::SizingCulprit(const EventContext& ctx, std::string* from) {
  Culprit culprit = ctx.culprit;
  std::string unused;
  if (from == nullptr) from = &unused;
  const double probe = ProbeRatio(ctx);
  culprit.measured_stage_slowdown = std::max(culprit.measured_stage_slowdown, probe);
  *from = culprit.measured_stage_slowdown > 1.0 ? "probe" : "job_ratio";
  if (probe > 0) return culprit;  // Measured: never the GEMM (at <= 1: see Plan).
  // Until the probe measured the culprit, the localization's own measurement of it (GEMM over
  // the median, or its compute over its stage's median from profiling) sizes it: the job's
  // slowdown ratio is indirect (outside load on the other ranks dilutes it: x1.21 for a x1.5 GPU
  // on a loaded 2-core machine) and, beside other events, relative to a job they already slowed.
  // A GEMM benchmark can overstate the training's slowdown (x3.89 for a x1.5 CPU-quota fault:
  // the benchmark asks for more of the capped resource than training does), which is why
  // Orchestrator waits for the probe before a first S2 plan (ProbeMeasured).
  if (culprit.measured_stage_slowdown <= 1.0 && culprit.cause == falcon::v1::CAUSE_COMPUTE &&
      ctx.validation_ratio > 1.0) {
    culprit.measured_stage_slowdown = ctx.validation_ratio;
    *from = "validation";
  }
  return culprit;
}

double S2MicroBatch::ProbeRatio(const EventContext& ctx) {
  const double now = ctx.probe.WorstCulpritRatio(kProbeSamples);
  return now > 0 ? now : ctx.probe_ratio_before_plan;  // Under a plan, before new samples.
}

bool S2MicroBatch::ProbeMeasured(const EventContext& ctx) { return ProbeRatio(ctx) > 0; }

std::vector<uint32_t> S2MicroBatch::PlanBase(const registry::JobEntry& job,
                                             const EventContext& ctx) const {
  if (directive_ != 0 && !before_.empty()) return before_;
  if (!ctx.other_s2_before.empty()) return ctx.other_s2_before;
  return std::vector<uint32_t>(job.job().micro_batches().begin(), job.job().micro_batches().end());
}

void S2MicroBatch::OnIssued(const PlannedDirective& /*plan*/, int64_t effective_iteration,
                            EventContext& ctx) {
  ctx.peer_level_before_plan = ctx.probe.PeerLevel();
  if (const double r = ctx.probe.WorstCulpritRatio(kProbeSamples); r > 0) {
    ctx.probe_ratio_before_plan = r;
  }
  ctx.probe.ClearSamples();  // The probe starts over under the plan.
  before_ = planned_before_;
  ctx.measurement.Restart(effective_iteration);
}

std::string S2MicroBatch::RevertBody(EventContext& ctx, const registry::JobEntry& job,
                                     falcon::v1::Directive* directive) {
  std::vector<uint32_t> m = before_;
  absl::StatusOr<JobShape> shape = ctx.Shape(job, {});
  if (shape.ok() && m.size() != shape->micro_batches.size()) m = shape->micro_batches;
  for (uint32_t v : m) directive->mutable_micro_batch_plan()->add_micro_batches(v);
  return absl::StrCat("micro-batches back to [", absl::StrJoin(m, ", "), "]");
}

void S2MicroBatch::Restore(uint64_t directive, const JobShape* shape) {
  MitigationStrategy::Restore(directive, shape);
  if (shape != nullptr) before_ = shape->micro_batches;
}

}  // namespace falcon::controller::mitigation
