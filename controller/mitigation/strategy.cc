#include "controller/mitigation/strategy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "controller/metrics/metric_table.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

EventContext::EventContext(uint64_t event_id, std::string job, Culprit culprit,
                           int measure_iterations, double no_help_fraction, int clear_iterations)
    : event_id(event_id),
      job(std::move(job)),
      culprit(std::move(culprit)),
      measurement(measure_iterations, no_help_fraction),
      probe(this->culprit.ranks, clear_iterations) {}

std::string EventContext::Subject() const {
  std::string s = absl::StrCat("job=", job, " event=", event_id);
  if (!culprit.ranks.empty()) absl::StrAppend(&s, " rank=", absl::StrJoin(culprit.ranks, ","));
  if (!culprit.nodes.empty()) {
    absl::StrAppend(&s, " node=", absl::StrJoin(culprit.nodes, ","),
                    " links=", culprit.links.size());
  } else if (!culprit.links.empty()) {
    absl::StrAppend(
        &s, " link=", absl::StrJoin(culprit.links, ",", [](std::string* out, const auto& l) {
          absl::StrAppend(out, l.src_rank(), "->", l.dst_rank());
        }));
  }
  return s;
}

absl::StatusOr<JobShape> EventContext::Shape(const registry::JobEntry& job_entry,
                                             const std::vector<uint32_t>& micro_batches) const {
  const analysis::plan::Layout* layout = nullptr;
  if (layouts != nullptr) {
    auto it = layouts->find(job);
    if (it != layouts->end()) layout = &it->second;
  }
  return ShapeOf(job_entry, layout, micro_batches);
}

void EventContext::Record(detection::EventActions& actions, falcon::v1::Strategy strategy,
                          uint64_t directive_id, int64_t iteration, const std::string& reason,
                          bool revert) {
  if (rebuilding) return;  // Already in the event's log.
  falcon::v1::Action a;
  a.set_strategy(strategy);
  a.set_directive_id(directive_id);
  a.set_iteration(iteration);
  a.set_time_ns(absl::ToUnixNanos(actions.Now()));
  a.set_reason(reason);
  a.set_dry_run(directive_id == 0 && strategy != falcon::v1::STRATEGY_S1_IGNORE &&
                actions.Settings(job).dry_run);
  a.set_revert(revert);
  // The event may have ended meanwhile (an S4 closed it); the action is then lost.
  if (absl::Status s = actions.RecordAction(event_id, a); !s.ok()) {
    CountError(metrics::where::kMitigationRecordAction, s);
  }
}

void EventContext::CountError(absl::string_view where, const absl::Status& status) const {
  LOG(WARNING) << "mitigation call failed " << Subject() << " where=" << where
               << " error=" << status;
  if (errors != nullptr) errors->CountError(where);
}

absl::string_view ShortName(analysis::plan::Strategy strategy) {
  switch (strategy) {
    case analysis::plan::Strategy::kS1Ignore:
      return "s1";
    case analysis::plan::Strategy::kS2MicroBatch:
      return "s2";
    case analysis::plan::Strategy::kS2LLayerSplit:
      return "s2l";
    case analysis::plan::Strategy::kS3Topology:
      return "s3";
    case analysis::plan::Strategy::kS4CheckpointRestart:
      return "s4";
  }
  return "unknown";
}

absl::Status MitigationStrategy::Issue(const analysis::plan::EscalationStep& step,
                                       const PlannedDirective& plan, EventContext& ctx,
                                       detection::EventActions& actions) {
  const auto strategy = static_cast<falcon::v1::Strategy>(level());
  const std::string& reason = plan.directive.reason();
  if (actions.Settings(ctx.job).dry_run) {
    dry_ = true;
    ctx.Record(actions, strategy, 0, actions.NextEffectiveIteration(ctx.job), reason, false);
    LOG(INFO) << "plan recorded, not sent (dry run) " << ctx.Subject()
              << " strategy=" << ShortName(level()) << " plan=\"" << plan.summary << "\"";
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> id = actions.IssueDirective(
      ctx.event_id, plan.directive, plan.rollback.has_value() ? &*plan.rollback : nullptr);
  if (!id.ok()) return id.status();
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  const int64_t effective =
      rec != nullptr ? rec->directive().effective_iteration() : step.iteration;
  if (absl::Status s =
          actions.MarkMitigating(ctx.event_id, absl::StrCat(what(), " (directive ", *id, ")"));
      !s.ok()) {
    ctx.CountError(metrics::where::kMitigationMarkMitigating, s);
  }
  ctx.Record(actions, strategy, *id, effective, reason, false);
  directive_ = *id;
  ceiling_ = plan.ceiling;
  OnIssued(plan, effective, ctx);
  // The directive's line (with its epoch, targets and reason, which holds the plan) is the
  // issuer's; this one is detail.
  VLOG(1) << "plan issued " << ctx.Subject() << " directive=" << *id
          << " strategy=" << ShortName(level()) << " plan=\"" << plan.summary << "\"";
  return absl::OkStatus();
}

std::optional<std::string> MitigationStrategy::Measure(int64_t iteration,
                                                       absl::Duration iteration_time,
                                                       EventContext& ctx,
                                                       detection::EventActions& actions) {
  const std::optional<absl::Duration> median = ctx.measurement.Add(iteration, iteration_time);
  if (!median.has_value()) return std::nullopt;
  if (absl::Status s = actions.SetMitigatedIterationTime(ctx.event_id, *median); !s.ok()) {
    ctx.CountError(metrics::where::kMitigationSetMitigatedTime, s);
  }
  VLOG(1) << "iteration under plan " << ctx.Subject() << " strategy=" << ShortName(level())
          << " iteration=" << iteration << " time_s=" << absl::ToDoubleSeconds(iteration_time)
          << " median_s=" << absl::ToDoubleSeconds(*median);
  if (!ctx.measurement.Due()) return std::nullopt;
  // Load from outside the job since the plan was issued, as the culprit's stage peers compute
  // (S2 of a compute fail-slow; 1: not measured). Read when the plan is judged (twice when
  // the first window is undecided).
  const double peers_now = ctx.probe.PeerLevel();
  const double outside_load = ctx.peer_level_before_plan > 0 && peers_now > 0
                                  ? peers_now / ctx.peer_level_before_plan
                                  : 1.0;
  const std::optional<PlanMeasurement::Judgement> j = ctx.measurement.Judge(ctx.slow, outside_load);
  if (!j.has_value()) return std::nullopt;
  std::string measured = absl::StrFormat(
      "measured %.3f s under the plan (median of %d iterations) vs slow %.3f s",
      absl::ToDoubleSeconds(j->median), j->iterations, absl::ToDoubleSeconds(ctx.slow));
  if (outside_load != 1.0) {
    absl::StrAppendFormat(
        &measured, " (x%.2f outside load on the culprit's stage peers' compute: %.3f s without it)",
        outside_load, absl::ToDoubleSeconds(j->judged));
  }
  if (!j->final) {
    LOG(INFO) << "plan measured longer " << ctx.Subject() << " directive=" << directive_
              << " strategy=" << ShortName(level()) << " why=\"" << measured
              << ": within the noise of slow, judged again over "
              << PlanMeasurement::kLongerWindows * j->iterations << " iterations\"";
    return std::nullopt;
  }
  if (j->helped) {
    LOG(INFO) << "plan kept " << ctx.Subject() << " directive=" << directive_
              << " strategy=" << ShortName(level()) << " why=\"" << measured << "\"";
    return std::nullopt;
  }
  LOG(INFO) << "plan did not help, reverting " << ctx.Subject() << " directive=" << directive_
            << " strategy=" << ShortName(level()) << " why=\"" << measured << "\"";
  return absl::StrCat(measured, ": it did not help");
}

void MitigationStrategy::Restore(uint64_t directive, const JobShape* /*shape*/) {
  directive_ = directive;
  ceiling_.reset();
}

absl::Status EventContext::CheckNotImbalance(const detection::EventActions& actions) const {
  if (culprit.cause != falcon::v1::CAUSE_COMPUTE) return absl::OkStatus();
  const falcon::v1::Event* event = actions.FindEvent(event_id);
  const int64_t since = event != nullptr ? event->onset_iteration() : 0;
  for (uint32_t rank : culprit.ranks) {
    std::string why;
    if (actions.IsBlameless(job, rank, since, &why)) {
      return absl::FailedPreconditionError(
          absl::StrCat("workload imbalance, not a fail-slow of rank ", rank, ": ", why));
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::controller::mitigation
