#include "controller/mitigation/plan_strategy.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/layer_split.h"
#include "controller/metrics/metric_table.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

void PlanStrategy::Revert(const analysis::plan::EscalationStep& step, EventContext& ctx,
                          detection::EventActions& actions) {
  const auto strategy = static_cast<falcon::v1::Strategy>(level());
  if (directive_ == 0) {
    if (!dry_) return;
    falcon::v1::Action a;
    a.set_strategy(strategy);
    a.set_time_ns(absl::ToUnixNanos(actions.Now()));
    a.set_iteration(step.iteration);
    a.set_reason(step.reason);
    a.set_dry_run(true);
    a.set_revert(true);
    if (absl::Status s = actions.RecordAction(ctx.event_id, a); !s.ok()) {
      ctx.CountError(metrics::where::kMitigationRecordAction, s);
    }
    dry_ = false;
    LOG(INFO) << "revert recorded, not sent (dry run) " << ctx.Subject()
              << " strategy=" << ShortName(level()) << " why=\"" << step.reason << "\"";
    return;
  }
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) {
    // The job is gone: nothing runs the plan any more.
    ctx.CountError(metrics::where::kMitigationRevertJobUnknown,
                   absl::NotFoundError(absl::StrCat("job '", ctx.job, "' unknown")));
    return;
  }
  falcon::v1::Directive d;
  d.set_reverts_directive_id(directive_);
  d.set_plan_version(job->job().plan_version() + 1);
  const std::string what = RevertBody(ctx, *job, &d);
  d.set_reason(absl::StrCat(step.reason, ": ", what));
  absl::StatusOr<uint64_t> id = actions.IssueDirective(ctx.event_id, d, nullptr);
  if (!id.ok()) {
    // The plan stays in force; the next revert step (recovery, level disabled) tries again.
    ctx.CountError(metrics::where::kMitigationRevertDirective, id.status());
    return;
  }
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  const int64_t effective =
      rec != nullptr ? rec->directive().effective_iteration() : step.iteration;
  ctx.Record(actions, strategy, *id, effective, d.reason(), /*revert=*/true);
  // The issuer logs the directive (with reverts=); this one is detail.
  VLOG(1) << "revert issued " << ctx.Subject() << " directive=" << *id << " reverts=" << directive_
          << " strategy=" << ShortName(level());
  OnDropped(ctx);
  directive_ = 0;
  ceiling_.reset();
}

bool PlanStrategy::OnDirectiveState(const falcon::v1::DirectiveRecord& record, EventContext& ctx,
                                    detection::EventActions& /*actions*/) {
  if (record.state() != falcon::v1::DirectiveRecord::STATE_REJECTED &&
      record.state() != falcon::v1::DirectiveRecord::STATE_TIMED_OUT) {
    return false;
  }
  LOG(INFO) << "plan dropped " << ctx.Subject() << " directive=" << directive_
            << " strategy=" << ShortName(level())
            << " state=" << falcon::v1::DirectiveRecord::State_Name(record.state()) << " why=\""
            << record.state_reason() << "\"";
  directive_ = 0;
  ceiling_.reset();
  OnDropped(ctx);
  return false;
}

void RecordPlanInForce(const falcon::v1::DirectiveRecord& record, detection::EventActions& actions,
                       common::ErrorCounter& errors) {
  const falcon::v1::Directive& d = record.directive();
  const registry::JobEntry* job = actions.FindJob(d.job());
  std::vector<uint32_t> m;
  // A micro-batch plan or a topology change keeps the split in force.
  google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit> split;
  if (job != nullptr) split = job->job().layer_split();
  if (d.has_micro_batch_plan()) {
    m.assign(d.micro_batch_plan().micro_batches().begin(),
             d.micro_batch_plan().micro_batches().end());
  } else if (d.has_layer_split()) {
    m.assign(d.layer_split().micro_batches().begin(), d.layer_split().micro_batches().end());
    split = d.layer_split().replicas();
    // Back to even (an S2L reverted): the job shows no split, as before any.
    const std::vector<common::StageBlocks> blocks = common::StageBlocksOf(d.layer_split());
    int total = 0;
    if (!blocks.empty()) {
      for (int b : blocks[0]) total += b;
    }
    if (common::IsEvenSplit(blocks, total)) split.Clear();
  } else if (d.has_topology_change()) {
    if (job == nullptr) return;  // The job ended: no plan to keep.
    m.assign(job->job().micro_batches().begin(), job->job().micro_batches().end());
  } else if (d.has_checkpoint_restart()) {
    // The job restarts without the excluded ranks, on fewer DP groups: the trainer starts that
    // new shape even (trainer/checkpoint/restart_plan.h), so no micro-batch plan or split of the
    // old shape stays in force.
    split.Clear();
  } else {
    return;
  }
  if (absl::Status s = actions.SetJobPlan(d.job(), d.plan_version(), m, split); !s.ok()) {
    LOG(WARNING) << "plan in force not recorded job=" << d.job() << " event=" << record.event_id()
                 << " directive=" << d.directive_id()
                 << " where=" << metrics::where::kMitigationSetJobPlan << " error=" << s;
    errors.CountError(metrics::where::kMitigationSetJobPlan);
  }
}

}  // namespace falcon::controller::mitigation
