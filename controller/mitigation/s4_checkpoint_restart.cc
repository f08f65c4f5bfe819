#include "controller/mitigation/s4_checkpoint_restart.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/metrics/metric_table.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

absl::StatusOr<PlannedDirective> S4CheckpointRestart::Plan(
    const analysis::plan::EscalationStep& step, EventContext& ctx,
    detection::EventActions& actions) {
  if (absl::Status s = ctx.CheckNotImbalance(actions); !s.ok()) return s;
  const std::vector<uint32_t> excluded = S4Excluded(ctx.culprit);
  if (excluded.empty()) {
    return absl::FailedPreconditionError(
        "S4: no culprit to leave out (the verdict named no rank, link or node)");
  }
  PlannedDirective out;
  out.summary = S4Summary(ctx.culprit);
  out.directive.set_reason(absl::StrCat(step.reason, "; ", out.summary));
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  out.directive.set_plan_version((job != nullptr ? job->job().plan_version() : 0) + 1);
  out.directive.mutable_checkpoint_restart()->set_checkpoint_dir(checkpoint_dir_);
  for (uint32_t r : excluded) out.directive.mutable_checkpoint_restart()->add_excluded_ranks(r);
  LOG(INFO) << "S4 plan computed " << ctx.Subject() << " excluded_ranks=["
            << absl::StrJoin(excluded, ",") << "] checkpoint_dir=" << checkpoint_dir_;
  return out;
}

void S4CheckpointRestart::OnIssued(const PlannedDirective& /*plan*/,
                                   int64_t /*effective_iteration*/, EventContext& ctx) {
  if (ctx.layouts != nullptr) ctx.layouts->erase(ctx.job);  // The restart sets the layout.
}

bool S4CheckpointRestart::OnDirectiveState(const falcon::v1::DirectiveRecord& record,
                                           EventContext& ctx, detection::EventActions& actions) {
  const falcon::v1::Directive& d = record.directive();
  const uint64_t id = d.directive_id();
  if (record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED) {
    directive_ = 0;
    const std::string why = absl::StrCat("S4 directive ", id, " failed: ", record.state_reason());
    // The rejection itself is logged and counted where the directive's state changed.
    LOG(INFO) << "S4 failed " << ctx.Subject() << " directive=" << id << " why=\""
              << record.state_reason() << "\"";
    ctx.Record(actions, falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART, 0, ctx.last_iteration, why,
               false);
    return false;
  }
  const std::string reason = absl::StrCat(
      "restarted without ranks [", absl::StrJoin(d.checkpoint_restart().excluded_ranks(), ", "),
      "] (S4, directive ", id, ")");
  if (absl::Status s = actions.CloseEvent(ctx.event_id, reason); !s.ok()) {
    ctx.CountError(metrics::where::kMitigationCloseEvent, s);
  } else {
    LOG(INFO) << "event closed by S4 " << ctx.Subject() << " directive=" << id
              << " state=" << falcon::v1::DirectiveRecord::State_Name(record.state());
  }
  return true;
}

}  // namespace falcon::controller::mitigation
