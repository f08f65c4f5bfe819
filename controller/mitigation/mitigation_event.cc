#include "controller/mitigation/mitigation_event.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/metrics/metric_table.h"
#include "controller/mitigation/escalation_settings.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

MitigationEvent::MitigationEvent(uint64_t event_id, std::string job, Culprit culprit,
                                 const OrchestratorOptions& o)
    : ctx_(event_id, std::move(job), std::move(culprit), o.measure_iterations, o.no_help_fraction,
           o.clear_iterations),
      s2l_(&s2_),
      s4_(o.checkpoint_dir) {}

absl::StatusOr<std::unique_ptr<MitigationEvent>> MitigationEvent::Create(
    const falcon::v1::Event& event, detection::EventActions& actions,
    const OrchestratorOptions& options, const common::Clock& clock, LayoutsInForce* layouts,
    S2LMeasurements* s2l_measurements, common::ErrorCounter* errors, bool rebuild) {
  const registry::JobEntry* job = actions.FindJob(event.job());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job '", event.job(), "' unknown"));
  Culprit culprit = CulpritOf(event, *job);
  const settings::EffectiveSettings settings = actions.Settings(event.job());
  absl::Duration healthy = absl::Nanoseconds(event.healthy_iteration_time_ns());
  absl::Duration slow = absl::Nanoseconds(event.slow_iteration_time_ns());
  const double ratio = event.slowdown_ratio();
  if (healthy <= absl::ZeroDuration() && slow > absl::ZeroDuration() && ratio > 1) {
    healthy = slow / ratio;
  }
  if (healthy <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError("no healthy iteration time to measure against");
  }
  if (slow <= healthy) {
    slow = healthy * (ratio > 1 ? ratio : 1 + std::max(0.01, settings.verification_min_ratio));
  }
  culprit.slowdown_ratio = absl::FDivDuration(slow, healthy);
  std::unique_ptr<MitigationEvent> e(
      new MitigationEvent(event.event_id(), event.job(), std::move(culprit), options));
  EventContext& ctx = e->ctx_;
  ctx.healthy = healthy;
  ctx.slow = slow;
  ctx.validation_ratio = event.validation_ratio();
  // The verdict measured the compute culprit slow (profiling or validation): a fault that clears
  // before the probe has its own samples of it still clears through the probe.
  if (ctx.culprit.cause == falcon::v1::CAUSE_COMPUTE &&
      ctx.validation_ratio >= 1 + settings.verification_min_ratio) {
    ctx.probe.SeenSlow();
  }
  ctx.layouts = layouts;
  ctx.s2l_measurements = s2l_measurements;
  ctx.errors = errors;
  ctx.last_iteration = std::max(event.verdict_iteration(), actions.LastIteration(event.job()));
  if (rebuild && s2l_measurements != nullptr) {
    // After a restart: what the newest layer split the event applied (a plan or its revert)
    // measured is S2L's cost in the job again, unless the job already has a newer one (from
    // another event rebuilt, or measured since: RecordS2LMeasurement).
    std::optional<S2LMeasured> newest;
    for (const falcon::v1::Action& a : event.actions()) {
      if (a.dry_run() || a.directive_id() == 0 ||
          a.strategy() != falcon::v1::STRATEGY_S2L_LAYER_SPLIT ||
          (newest.has_value() && a.directive_id() <= newest->directive_id)) {
        continue;
      }
      const falcon::v1::DirectiveRecord* d = actions.FindDirective(a.directive_id());
      if (d == nullptr || d->state() != falcon::v1::DirectiveRecord::STATE_APPLIED) continue;
      if (auto m = S2LMeasurementOf(*d, nullptr); m.has_value()) {
        newest = S2LMeasured{*m, a.directive_id()};
      }
    }
    auto known = s2l_measurements->find(event.job());
    if (newest.has_value() &&
        (known == s2l_measurements->end() || known->second.directive_id < newest->directive_id)) {
      (*s2l_measurements)[event.job()] = *newest;
      LOG(INFO) << "S2L pause rebuilt job=" << event.job() << " event=" << event.event_id()
                << " directive=" << newest->directive_id << " "
                << S2LMeasurementText(newest->measurement);
    }
  }
  absl::StatusOr<analysis::plan::Escalation> esc =
      analysis::plan::Escalation::Create(e->EscalationOptionsNow(actions), clock);
  if (!esc.ok()) return esc.status();
  e->esc_.emplace(*std::move(esc));
  // A new event has no ceiling; a rebuilt one keeps the one it has until the plan in force
  // changes.
  falcon::v1::PlanCeiling unused;
  e->synced_ceiling_ = e->CeilingKey(&unused);
  if (!rebuild) return e;
  // Plans in force from the event's log (the controller restarted).
  ctx.rebuilding = true;
  uint64_t s2 = 0, s2l = 0, s3 = 0, s4 = 0;
  for (const falcon::v1::Action& a : event.actions()) {
    // A revert without a directive of its own (S2 handed over to S2L) ends the level too.
    if (a.dry_run() || (a.directive_id() == 0 && !a.revert())) continue;
    uint64_t* slot = nullptr;
    switch (a.strategy()) {
      case falcon::v1::STRATEGY_S2_MICRO_BATCH:
        slot = &s2;
        break;
      case falcon::v1::STRATEGY_S2L_LAYER_SPLIT:
        slot = &s2l;
        break;
      case falcon::v1::STRATEGY_S3_TOPOLOGY:
        slot = &s3;
        break;
      case falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART:
        slot = &s4;
        break;
      default:
        break;  // S1 sends nothing.
    }
    if (slot != nullptr) *slot = a.revert() ? 0 : a.directive_id();
  }
  absl::StatusOr<JobShape> shape = ShapeOf(*job, nullptr, {});
  const JobShape* registered = shape.ok() ? &*shape : nullptr;
  e->s2_.Restore(s2, registered);
  e->s2l_.Restore(s2l, registered);
  // S2L planned over S2 in force (S2 is skipped while S2L is): its revert restores S2's plan.
  if (s2 != 0 && s2l != 0) {
    const falcon::v1::DirectiveRecord* d = actions.FindDirective(s2);
    if (d != nullptr && d->directive().has_micro_batch_plan()) {
      const auto& m = d->directive().micro_batch_plan().micro_batches();
      e->s2l_.set_micro_batches_before(std::vector<uint32_t>(m.begin(), m.end()));
    }
  }
  e->s3_.Restore(s3, registered);
  e->s4_.Restore(s4, registered);
  // The plan in force is measured, and its culprit probed (ProbeRank), from its effective
  // iteration on, as before the restart: without it the probe stays empty and cannot refuse a
  // recovery the plan itself caused.
  int64_t measuring_from = -1;
  if (const MitigationStrategy* plan = e->PlanInForce(); plan != nullptr) {
    if (const falcon::v1::DirectiveRecord* d = actions.FindDirective(plan->directive())) {
      measuring_from = d->directive().effective_iteration();
      ctx.measurement.Resume(measuring_from, ctx.last_iteration);
    }
  }
  e->synced_ceiling_ = e->CeilingKey(&unused);
  LOG(INFO) << "mitigation state rebuilt " << ctx.Subject() << " s2_directive=" << s2
            << " s2l_directive=" << s2l << " s3_directive=" << s3 << " s4_directive=" << s4
            << " measuring_from=" << measuring_from;
  return e;
}

absl::StatusOr<std::vector<analysis::plan::EscalationStep>> MitigationEvent::StartEscalation(
    const falcon::v1::Event& event) {
  const analysis::plan::Cause cause = ToEscalationCause(event.cause());
  absl::StatusOr<std::vector<analysis::plan::EscalationStep>> steps =
      esc_->StartEvent(cause, ctx_.healthy, ctx_.slow, ctx_.last_iteration);
  if (!steps.ok()) return steps.status();
  LOG(INFO) << "mitigation started " << ctx_.Subject()
            << " cause=" << analysis::plan::CauseName(cause)
            << " healthy_s=" << absl::ToDoubleSeconds(ctx_.healthy)
            << " slow_s=" << absl::ToDoubleSeconds(ctx_.slow) << " lost_s=" << event.lost_seconds();
  if (event.lost_seconds() <= 0) return steps;
  absl::StatusOr<std::vector<analysis::plan::EscalationStep>> more =
      esc_->OnIteration(ctx_.last_iteration, ctx_.healthy + absl::Seconds(event.lost_seconds()));
  if (!more.ok()) {
    ctx_.CountError(metrics::where::kMitigationEscalationIteration, more.status());
    return steps;
  }
  steps->insert(steps->end(), more->begin(), more->end());
  return steps;
}

MitigationStrategy* MitigationEvent::Of(analysis::plan::Strategy s) {
  switch (s) {
    case analysis::plan::Strategy::kS2MicroBatch:
      return &s2_;
    case analysis::plan::Strategy::kS2LLayerSplit:
      return &s2l_;
    case analysis::plan::Strategy::kS3Topology:
      return &s3_;
    case analysis::plan::Strategy::kS4CheckpointRestart:
      return &s4_;
    default:
      return nullptr;
  }
}

MitigationStrategy* MitigationEvent::WithDirective(uint64_t id) {
  if (id == 0) return nullptr;
  MitigationStrategy* const levels[] = {&s4_, &s2_, &s2l_, &s3_};
  for (MitigationStrategy* s : levels) {
    if (s->directive() == id) return s;
  }
  return nullptr;
}

MitigationStrategy* MitigationEvent::PlanInForce() {
  if (s3_.directive() != 0) return &s3_;
  if (s2l_.directive() != 0) return &s2l_;
  if (s2_.directive() != 0) return &s2_;
  return nullptr;
}

analysis::plan::EscalationOptions MitigationEvent::EscalationOptionsNow(
    detection::EventActions& actions) {
  analysis::plan::EscalationOptions o = EscalationOptionsFor(actions.Settings(ctx_.job));
  s2l_.CostInputs(ctx_, actions, &o);
  return o;
}

std::string MitigationEvent::CeilingKey(falcon::v1::PlanCeiling* want) {
  want->Clear();  // Empty: clears.
  const MitigationStrategy* plan = PlanInForce();
  if (plan != nullptr && plan->ceiling().has_value()) *want = *plan->ceiling();
  return absl::StrCat(plan != nullptr ? plan->directive() : 0, "/", want->SerializeAsString());
}

void MitigationEvent::SyncCeiling(detection::EventActions& actions, bool clear_without_plan) {
  if (ctx_.rebuilding || ceiling_frozen_) return;
  if (!clear_without_plan && PlanInForce() == nullptr) return;
  falcon::v1::PlanCeiling want;
  std::string key = CeilingKey(&want);
  if (synced_ceiling_.has_value() && *synced_ceiling_ == key) return;
  if (absl::Status s = actions.SetPlanCeiling(ctx_.event_id, want); !s.ok()) {
    ctx_.CountError(metrics::where::kMitigationSetCeiling, s);
    return;
  }
  synced_ceiling_ = std::move(key);
  VLOG(1) << "ceiling " << ctx_.Subject() << " strategy=" << want.strategy()
          << " recoverable=" << want.recoverable();
}

std::optional<std::string> MitigationEvent::StillSlow(const falcon::v1::Event& event,
                                                      detection::EventActions& actions) {
  const double min_ratio = actions.Settings(ctx_.job).verification_min_ratio;
  if (ctx_.culprit.cause == falcon::v1::CAUSE_COMMUNICATION) {
    if (s3_.directive() == 0) return std::nullopt;
    const double healthy = static_cast<double>(event.healthy_iteration_time_ns());
    const double mitigated = static_cast<double>(event.mitigated_iteration_time_ns());
    if (healthy <= 0 || mitigated <= 0 || mitigated > healthy * (1 + min_ratio)) {
      return std::nullopt;
    }
    return absl::StrFormat(
        "S3 in force keeps the job off the slow link(s) and already runs it at x%.2f of its "
        "healthy time: back at the healthy level is the plan's doing, no sign the links "
        "recovered; the plan stays",
        mitigated / healthy);
  }
  if (ctx_.culprit.cause != falcon::v1::CAUSE_COMPUTE) return std::nullopt;
  const double ratio = ctx_.probe.WorstCulpritRatio(ComputeProbe::kWindow);
  if (ratio < 1 + min_ratio) return std::nullopt;
  return absl::StrFormat(
      "compute probe: the culprit's compute per micro-batch is still x%.2f of its stage peers' "
      "(>= x%.2f)",
      ratio, 1 + min_ratio);
}

std::optional<MitigationEvent::Recovery> MitigationEvent::ProbeRank(
    const falcon::v1::IterationSummary& summary, detection::EventActions& actions) {
  if (ctx_.culprit.cause != falcon::v1::CAUSE_COMPUTE) return std::nullopt;
  const bool before_s2 = s2_.directive() == 0 && s2l_.directive() == 0;
  const int64_t from = ctx_.measurement.from();
  if (!before_s2 && (from < 0 || summary.iteration() < from + 2)) return std::nullopt;
  const registry::JobEntry* job = actions.FindJob(ctx_.job);
  if (job == nullptr) return std::nullopt;
  if (!ctx_.probe.has_layout()) {
    absl::StatusOr<JobShape> shape = ctx_.Shape(*job, {});
    if (!shape.ok()) {  // No layout, no attribution: the probe stays off.
      VLOG(1) << "compute probe off " << ctx_.Subject() << " why=\"" << shape.status() << "\"";
      return std::nullopt;
    }
    ctx_.probe.SetLayout(shape->layout, shape->micro_batches, shape->pipeline_blocks);
  }
  const uint32_t rank = summary.rank();
  const std::vector<uint32_t> m(job->job().micro_batches().begin(),
                                job->job().micro_batches().end());
  if (!ctx_.probe.Add(rank, summary.compute_ns(), m, job->job().layer_split())) {
    return std::nullopt;
  }
  if (!ctx_.probe.IsCulprit(rank)) return std::nullopt;
  const double min_ratio = actions.Settings(ctx_.job).verification_min_ratio;
  const ComputeProbe::Reading reading = ctx_.probe.Observe(rank, min_ratio);
  VLOG(1) << "compute probe " << ctx_.Subject() << " iteration=" << summary.iteration()
          << " ratio=" << reading.ratio << " clear_streak=" << reading.streak
          << " fixed_cost_ms=" << ctx_.probe.FixedCostNs(rank) * 1e-6
          << " peer_level_ms=" << ctx_.probe.PeerLevel() * 1e-6;
  if (reading.state != ComputeProbe::State::kCleared) return std::nullopt;
  Recovery r;
  r.iteration = summary.iteration();
  r.rank = rank;
  r.ratio = reading.ratio;
  r.reason = absl::StrFormat(
      "rank %d compute per micro-batch back to x%.2f of its stage peers' at iteration %d (%s)",
      rank, reading.ratio, r.iteration,
      before_s2 ? "no plan in force: the culprit's own speed, whatever load outside the job does "
                  "to the iteration time"
                : "the plan in force hides the fault from the iteration time");
  return r;
}

}  // namespace falcon::controller::mitigation
