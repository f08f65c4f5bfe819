#include "controller/mitigation/orchestrator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/metrics/metric_table.h"
#include "controller/mitigation/escalation_settings.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

using analysis::plan::EscalationStep;
using analysis::plan::Strategy;

Orchestrator::Orchestrator(OrchestratorOptions options, const common::Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

Orchestrator::~Orchestrator() = default;

void Orchestrator::SetErrorCounter(common::ErrorCounter* errors) {
  errors_ = errors != nullptr ? errors : &no_errors_;
  for (auto& [id, st] : events_) st->ctx().errors = errors_;
}

MitigationEvent* Orchestrator::Start(const falcon::v1::Event& event,
                                     detection::EventActions& actions, bool rebuild) {
  absl::StatusOr<std::unique_ptr<MitigationEvent>> created = MitigationEvent::Create(
      event, actions, options_, *clock_, &layouts_, &s2l_measurements_, errors_, rebuild);
  if (!created.ok()) {
    if (absl::IsNotFound(created.status())) return nullptr;  // The job is gone.
    // Tried again at every job iteration (the event may change): logged and counted once per
    // event and error.
    std::string& last = not_started_[event.event_id()];
    if (last != created.status().ToString()) {
      last = created.status().ToString();
      LOG(WARNING) << "mitigation not started job=" << event.job() << " event=" << event.event_id()
                   << " error=\"" << created.status() << "\"";
      errors_->CountError(metrics::where::kMitigationStart);
    }
    return nullptr;
  }
  not_started_.erase(event.event_id());
  MitigationEvent* e = created->get();
  events_[event.event_id()] = *std::move(created);
  absl::StatusOr<Steps> steps = e->StartEscalation(event);
  if (!steps.ok()) {
    e->ctx().CountError(metrics::where::kMitigationEscalationStart, steps.status());
    events_.erase(event.event_id());
    return nullptr;
  }
  Execute(*e, *steps, metrics::where::kMitigationEscalationStart, actions);
  e->ctx().rebuilding = false;
  return e;
}

void Orchestrator::Execute(MitigationEvent& e, const absl::StatusOr<Steps>& steps,
                           absl::string_view where, detection::EventActions& actions) {
  if (!steps.ok()) {
    e.ctx().CountError(where, steps.status());
    return;
  }
  for (const EscalationStep& step : *steps) {
    switch (step.action) {
      case EscalationStep::Action::kApply:
        Apply(e, step, actions);
        break;
      case EscalationStep::Action::kRevert:
        if (MitigationStrategy* s = e.Of(step.strategy); s != nullptr) {
          RevertLevel(e, s, step, actions);
        }
        break;
      case EscalationStep::Action::kSkip:
        e.ctx().Record(actions, static_cast<falcon::v1::Strategy>(step.strategy), 0, step.iteration,
                       absl::StrCat("skip: ", step.reason), false);
        break;
      case EscalationStep::Action::kEnd:
        LOG(INFO) << "mitigation ended " << e.ctx().Subject()
                  << " highest=" << ShortName(step.strategy)
                  << " lost_s=" << absl::ToDoubleSeconds(step.lost) << " why=\"" << step.reason
                  << "\"";
        e.set_ended();
        e.waiting_s2.reset();
        e.waiting_s2l.reset();
        break;
    }
  }
  e.SyncCeiling(actions);
}

void Orchestrator::Apply(MitigationEvent& e, const EscalationStep& step,
                         detection::EventActions& actions) {
  const bool probe_gated =
      step.strategy == Strategy::kS2MicroBatch || step.strategy == Strategy::kS2LLayerSplit;
  if (probe_gated && e.Waiting(step.strategy).has_value()) {
    // The escalation was logged when it was decided; this is its plan, after the wait.
    LOG(INFO) << ShortName(step.strategy) << " resumes " << e.ctx().Subject()
              << " iteration=" << step.iteration
              << " waited_iterations=" << step.iteration - e.waiting_s2_since;
  } else {
    LOG(INFO) << (step.strategy == Strategy::kS1Ignore ? "strategy chosen " : "escalating ")
              << e.ctx().Subject() << " strategy=" << ShortName(step.strategy)
              << " lost_s=" << absl::ToDoubleSeconds(step.lost)
              << " cost_s=" << absl::ToDoubleSeconds(step.cost) << " why=\"" << step.reason << "\"";
  }
  MitigationStrategy* s = e.Of(step.strategy);
  if (s == nullptr) {  // S1: keep going.
    e.ctx().Record(actions, falcon::v1::STRATEGY_S1_IGNORE, 0, step.iteration, step.reason, false);
    return;
  }
  if (s->directive() != 0) return;  // In force already (rebuilt after a restart).
  if (s == &e.s2() && e.s2l().directive() != 0) {
    // S2L's plan carries its own micro-batch plan, balanced for its split.
    Skip(e, step.strategy,
         absl::StrCat("the S2L plan in force (directive ", e.s2l().directive(),
                      ") already balances the micro-batches for its split"),
         step.iteration, actions);
    return;
  }
  // Concurrent events of one job: S2L has no hand-over between events (S2 has, RevertLevel), so
  // one event's S2L does not share the job with another event's S2 or S2L plan: neither would
  // know the other's split, and the first revert would undo both.
  if (s == &e.s2() || s == &e.s2l()) {
    for (const auto& [id, o] : events_) {
      if (o.get() == &e || o->ctx().job != e.ctx().job) continue;
      const uint64_t other =
          s == &e.s2() ? o->s2l().directive() : std::max(o->s2().directive(), o->s2l().directive());
      if (other == 0) continue;
      Skip(e, step.strategy,
           absl::StrCat("event ", id, "'s ", o->s2l().directive() != 0 ? "S2L" : "S2",
                        " plan is in force on the job (directive ", other,
                        "); S2L is not shared between events"),
           step.iteration, actions);
      return;
    }
  }
  if (probe_gated && !S2Ready(e, step)) return;
  SetOthers(e, 0);
  absl::StatusOr<PlannedDirective> plan = s->Plan(step, e.ctx(), actions);
  const absl::Status issued = plan.ok() ? s->Issue(step, *plan, e.ctx(), actions) : plan.status();
  if (issued.ok()) {
    // A higher level in force: an S2 (S2L) step still waiting for the probe would land on its
    // plan.
    if (s != &e.s2()) e.waiting_s2.reset();
    if (s != &e.s2() && s != &e.s2l()) e.waiting_s2l.reset();
    if (s == &e.s4() && e.s4().directive() != 0) {  // The restart supersedes the plans.
      e.s2().Supersede();
      e.s2l().Supersede();
      e.s3().Supersede();
    }
    e.SyncCeiling(actions);
    return;
  }
  if (s == &e.s4()) {  // The last level: nothing to skip to.
    LOG(WARNING) << "S4 not issued " << e.ctx().Subject() << " error=\"" << issued << "\"";
    errors_->CountError(metrics::where::kMitigationS4Issue);
    e.ctx().Record(actions, falcon::v1::STRATEGY_S1_IGNORE, 0, step.iteration,
                   absl::StrCat("S4 not issued: ", issued.message()), false);
    return;
  }
  Skip(e, step.strategy, std::string(issued.message()), step.iteration, actions);
}

bool Orchestrator::S2WaitOver(MitigationEvent& e, int64_t iteration) {
  return S2MicroBatch::ProbeMeasured(e.ctx()) ||
         iteration - e.waiting_s2_since >= kS2ProbeWaitIterations;
}

bool Orchestrator::S2Ready(MitigationEvent& e, const EscalationStep& step) {
  EventContext& ctx = e.ctx();
  std::optional<EscalationStep>& waiting = e.Waiting(step.strategy);
  if (ctx.culprit.cause != falcon::v1::CAUSE_COMPUTE || S2MicroBatch::ProbeMeasured(ctx)) {
    waiting.reset();
    return true;
  }
  if (!waiting.has_value()) {
    if (e.waiting_s2_since < 0) {
      e.waiting_s2_since = ctx.last_iteration;
      LOG(INFO) << ShortName(step.strategy) << " waits for the compute probe " << ctx.Subject()
                << " iteration=" << ctx.last_iteration
                << " up_to_iterations=" << kS2ProbeWaitIterations;
    }
    if (!S2WaitOver(e, ctx.last_iteration)) {
      waiting = step;
      return false;
    }
  } else if (!S2WaitOver(e, ctx.last_iteration)) {
    return false;
  }
  LOG(INFO) << ShortName(step.strategy) << " sized without the compute probe " << ctx.Subject()
            << " iteration=" << ctx.last_iteration
            << " waited_iterations=" << ctx.last_iteration - e.waiting_s2_since
            << " why=\"no culprit and stage-peer summaries to measure; sizing from the "
               "localization's measurement\"";
  waiting.reset();
  return true;
}

void Orchestrator::SetOthers(MitigationEvent& e, uint64_t leaving) {
  EventContext& ctx = e.ctx();
  ctx.other_culprits.clear();
  ctx.other_s2_before.clear();
  for (const auto& [id, o] : events_) {
    if (id == ctx.event_id || id == leaving || o->ctx().job != ctx.job) continue;
    const Culprit c = S2MicroBatch::SizingCulprit(o->ctx());
    if (c.cause != falcon::v1::CAUSE_COMPUTE && c.cause != falcon::v1::CAUSE_COMMUNICATION)
      continue;
    ctx.other_culprits.push_back(c);
    if (o->s2().directive() != 0 && ctx.other_s2_before.empty()) {
      ctx.other_s2_before = o->s2().before();
    }
  }
}

void Orchestrator::RevertLevel(MitigationEvent& e, MitigationStrategy* s,
                               const EscalationStep& step, detection::EventActions& actions) {
  // A joint S2 plan (docs/algorithms.md#concurrent-events): while another event of the job still
  // has S2 in force, the job is not put back to the split before S2; the newest such event plans
  // again for the culprits still active.
  // Waiting for the probe: nothing to revert.
  if (s == &e.s2()) e.waiting_s2.reset();
  if (s == &e.s2l()) e.waiting_s2l.reset();
  if (s == &e.s2() && e.s2().directive() != 0 && e.s2l().directive() != 0) {
    // S2L's plan replaced S2's micro-batches: nothing of S2 runs any more. S2L's revert restores
    // what S2 replaced instead.
    const std::string why =
        absl::StrCat(step.reason, ": the S2L plan in force (directive ", e.s2l().directive(),
                     ") replaced S2's micro-batches; its revert restores [",
                     absl::StrJoin(e.s2().before(), ", "), "]");
    LOG(INFO) << "plan handed over " << e.ctx().Subject() << " strategy=s2 to=s2l why=\""
              << step.reason << "\"";
    e.ctx().Record(actions, falcon::v1::STRATEGY_S2_MICRO_BATCH, 0, step.iteration, why,
                   /*revert=*/true);
    if (!e.s2().before().empty()) e.s2l().set_micro_batches_before(e.s2().before());
    e.s2().Supersede();
    return;
  }
  MitigationEvent* heir = nullptr;
  if (s == &e.s2() && e.s2().directive() != 0) {
    for (const auto& [id, o] : events_) {
      if (o.get() != &e && o->ctx().job == e.ctx().job && o->s2().directive() != 0) heir = o.get();
    }
  }
  if (heir == nullptr) {
    s->Revert(step, e.ctx(), actions);
    e.SyncCeiling(actions);
    return;
  }
  const std::string why =
      absl::StrCat("S2 plan handed over to event ", heir->ctx().event_id,
                   ", which plans for the culprits still active (", step.reason, ")");
  LOG(INFO) << "plan handed over " << e.ctx().Subject() << " strategy=s2"
            << " to_event=" << heir->ctx().event_id << " why=\"" << step.reason << "\"";
  e.ctx().Record(actions, falcon::v1::STRATEGY_S2_MICRO_BATCH, 0, step.iteration, why,
                 /*revert=*/true);
  e.s2().Supersede();
  SetOthers(*heir, e.ctx().event_id);
  EscalationStep replan = step;
  replan.action = EscalationStep::Action::kApply;
  replan.reason = absl::StrCat("event ", e.ctx().event_id, " left the joint S2 plan");
  absl::StatusOr<PlannedDirective> plan = heir->s2().Plan(replan, heir->ctx(), actions);
  const absl::Status issued =
      plan.ok() ? heir->s2().Issue(replan, *plan, heir->ctx(), actions) : plan.status();
  if (!issued.ok()) {
    // The joint plan stays: it still helps the heir's culprit.
    LOG(INFO) << "joint plan kept " << heir->ctx().Subject() << " strategy=s2 why=\""
              << issued.message() << "\"";
  }
}

void Orchestrator::Skip(MitigationEvent& e, Strategy s, const std::string& why, int64_t iteration,
                        detection::EventActions& actions) {
  LOG(INFO) << "strategy not applicable " << e.ctx().Subject() << " strategy=" << ShortName(s)
            << " why=\"" << why << "\"";
  if (!e.escalation().active()) {
    // The ladder already ended (S4 in the same steps: the lost time paid for both at once): the
    // skip is still the event's record of why that level was passed over.
    e.ctx().Record(
        actions, static_cast<falcon::v1::Strategy>(s), 0, iteration,
        absl::StrCat("skip: ", analysis::plan::StrategyName(s), " not applicable: ", why), false);
    return;
  }
  Execute(e, e.escalation().MarkInapplicable(s, why, iteration),
          metrics::where::kMitigationEscalationSkip, actions);
}

void Orchestrator::OnVerdict(const falcon::v1::Event& event, detection::EventActions& actions) {
  if (events_.count(event.event_id())) return;
  MitigationEvent* st = Start(event, actions, /*rebuild=*/false);
  if (st != nullptr && st->Done()) events_.erase(event.event_id());
}

void Orchestrator::OnJobIteration(const falcon::v1::Event& event, int64_t iteration,
                                  absl::Duration iteration_time, detection::EventActions& actions) {
  auto it = events_.find(event.event_id());
  MitigationEvent* st = nullptr;
  if (it != events_.end()) {
    st = it->second.get();
  } else {
    // After a controller restart: rebuild the state of an event that reached its verdict.
    if (event.state() != falcon::v1::EVENT_STATE_LOCALIZED &&
        event.state() != falcon::v1::EVENT_STATE_MITIGATING) {
      return;
    }
    if (!actions.Settings(event.job()).mitigation_enabled && event.actions_size() == 0) return;
    st = Start(event, actions, /*rebuild=*/true);
    if (st == nullptr) return;
  }
  if (iteration <= st->ctx().last_iteration || st->ended()) {
    if (st->Done()) events_.erase(event.event_id());
    return;
  }
  st->ctx().last_iteration = iteration;

  // Settings changed at run time (a level disabled, mitigation off, new costs, a measured S2L
  // pause, S2L's plan moving other blocks).
  const analysis::plan::EscalationOptions want = st->EscalationOptionsNow(actions);
  if (!SameEscalationOptions(want, st->escalation().options())) {
    LOG(INFO) << "escalation settings changed " << st->ctx().Subject()
              << " iteration=" << iteration;
    Execute(*st, st->escalation().UpdateOptions(want, iteration),
            metrics::where::kMitigationEscalationSettings, actions);
  }

  // Measure the plan in force; one that does not help is reverted and its level skipped.
  if (MitigationStrategy* plan = st->PlanInForce(); plan != nullptr) {
    const std::optional<std::string> why =
        plan->Measure(iteration, iteration_time, st->ctx(), actions);
    if (why.has_value()) {
      EscalationStep revert;
      revert.action = EscalationStep::Action::kRevert;
      revert.strategy = plan->level();
      revert.iteration = iteration;
      revert.reason = *why;
      RevertLevel(*st, plan, revert, actions);
      Skip(*st, plan->level(), *why, iteration, actions);
    }
  }

  // A first S2 (S2L) plan waiting for the compute probe (S2Ready).
  for (Strategy level : {Strategy::kS2MicroBatch, Strategy::kS2LLayerSplit}) {
    if (st->Waiting(level).has_value() && S2WaitOver(*st, iteration)) {
      EscalationStep step = *st->Waiting(level);
      step.iteration = iteration;
      Apply(*st, step, actions);
    }
  }

  if (st->escalation().active()) {
    Execute(*st, st->escalation().OnIteration(iteration, iteration_time),
            metrics::where::kMitigationEscalationIteration, actions);
    VLOG(1) << "job iteration " << st->ctx().Subject() << " iteration=" << iteration
            << " time_s=" << absl::ToDoubleSeconds(iteration_time)
            << " lost_s=" << absl::ToDoubleSeconds(st->escalation().lost());
  }
  if (st->Done()) events_.erase(event.event_id());
}

void Orchestrator::OnRankIteration(const falcon::v1::Event& event,
                                   const falcon::v1::IterationSummary& summary,
                                   detection::EventActions& actions) {
  auto it = events_.find(event.event_id());
  if (it == events_.end()) return;
  MitigationEvent& e = *it->second;
  const std::optional<MitigationEvent::Recovery> r = e.ProbeRank(summary, actions);
  if (!r.has_value()) return;
  EventContext& ctx = e.ctx();
  LOG(INFO) << "recovery detected by compute probe job=" << ctx.job << " event=" << ctx.event_id
            << " rank=" << r->rank << " iteration=" << r->iteration << " ratio=" << r->ratio;
  if (absl::Status s = actions.RecoverEvent(ctx.event_id, r->iteration, r->reason); !s.ok()) {
    ctx.CountError(metrics::where::kMitigationRecoverEvent, s);
    return;
  }
  ctx.last_iteration = std::max(ctx.last_iteration, r->iteration);
  e.FreezeCeiling();  // As OnRecovered: the ceiling of the plan in force when it cleared.
  if (e.escalation().active()) {
    Execute(e, e.escalation().OnCleared(r->iteration), metrics::where::kMitigationEscalationCleared,
            actions);
  }
  events_.erase(it);
}

std::optional<std::string> Orchestrator::StillSlow(const falcon::v1::Event& event,
                                                   detection::EventActions& actions) {
  auto it = events_.find(event.event_id());
  if (it == events_.end()) return std::nullopt;
  return it->second->StillSlow(event, actions);
}

void Orchestrator::OnRecovered(const falcon::v1::Event& event, detection::EventActions& actions) {
  not_started_.erase(event.event_id());
  auto it = events_.find(event.event_id());
  if (it == events_.end()) {
    // A restart lost the state: rebuild what is in force from the log, then revert it.
    bool any = false;
    for (const falcon::v1::Action& a : event.actions()) any = any || a.directive_id() != 0;
    if (!any) return;
    if (Start(event, actions, /*rebuild=*/true) == nullptr) return;
    it = events_.find(event.event_id());
  }
  MitigationEvent& e = *it->second;
  const int64_t iteration = std::max(event.recovery_iteration(), e.ctx().last_iteration);
  LOG(INFO) << "event recovered, reverting plans in force " << e.ctx().Subject()
            << " iteration=" << iteration;
  e.FreezeCeiling();
  if (e.escalation().active()) {
    Execute(e, e.escalation().OnCleared(iteration), metrics::where::kMitigationEscalationCleared,
            actions);
  }
  events_.erase(it);
}

void Orchestrator::OnDirectiveState(const falcon::v1::DirectiveRecord& record,
                                    detection::EventActions& actions) {
  if (record.state() == falcon::v1::DirectiveRecord::STATE_APPLIED ||
      // A timed-out S4 restarts the job too (its ranks exit to restart).
      (record.state() == falcon::v1::DirectiveRecord::STATE_TIMED_OUT &&
       record.directive().has_checkpoint_restart())) {
    RecordPlanInForce(record, actions, *errors_);
    if (record.directive().has_layer_split()) RecordS2LMeasurement(record);
  }
  auto it = events_.find(record.event_id());
  if (it == events_.end()) return;
  MitigationEvent& e = *it->second;
  const uint64_t id = record.directive().directive_id();
  MitigationStrategy* s = e.WithDirective(id);
  if (s == nullptr) return;
  if (s->OnDirectiveState(record, e.ctx(), actions)) {  // S4 ended the event.
    events_.erase(it);
    return;
  }
  // A plan dropped (rejected, timed out): the one still in force, or none. A revert's record
  // leaves the reverted plan's ceiling on the event.
  e.SyncCeiling(actions,
                /*clear_without_plan=*/record.directive().reverts_directive_id() == 0 &&
                    record.state() != falcon::v1::DirectiveRecord::STATE_APPLIED);
  const bool rejected = record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED;
  if (s == &e.s4() ||
      (!rejected && record.state() != falcon::v1::DirectiveRecord::STATE_TIMED_OUT)) {
    return;
  }
  Skip(e, s->level(),
       absl::StrCat("directive ", id, " ", rejected ? "rejected" : "timed out", ": ",
                    record.state_reason()),
       e.ctx().last_iteration, actions);
}

absl::StatusOr<falcon::v1::DryRunPlanResponse> Orchestrator::DryRun(
    const falcon::v1::Event& event, detection::EventActions& actions) {
  auto it = events_.find(event.event_id());
  if (it == events_.end()) {
    return absl::NotFoundError(
        absl::StrCat("event ", event.event_id(), " has no mitigation state"));
  }
  MitigationEvent& e = *it->second;
  const EventContext& ctx = e.ctx();
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job '", ctx.job, "' unknown"));
  absl::StatusOr<JobShape> shape = ctx.Shape(*job, e.s2().PlanBase(*job, ctx));
  if (!shape.ok()) return shape.status();
  if (e.s2l().directive() != 0) {
    // Plans start from what was in force before S2L (as S2 from what it replaced).
    shape->layer_split = e.s2l().split_before();
    if (e.s2().directive() == 0 &&
        e.s2l().base_micro_batches().size() == shape->micro_batches.size()) {
      shape->micro_batches = e.s2l().base_micro_batches();
    }
  }
  LadderState state;
  state.iteration = std::max(ctx.last_iteration, actions.LastIteration(ctx.job));
  state.lost = e.escalation().lost();
  for (const EscalationStep& step : e.escalation().history()) {
    const auto strategy = static_cast<falcon::v1::Strategy>(step.strategy);
    switch (step.action) {
      case EscalationStep::Action::kApply: {
        // A plan's directive takes effect later than decided: show where it did.
        int64_t at = step.iteration;
        if (MitigationStrategy* s = e.Of(step.strategy); s != nullptr && s->directive() != 0) {
          if (const falcon::v1::DirectiveRecord* r = actions.FindDirective(s->directive())) {
            at = r->directive().effective_iteration();
          }
        }
        if ((step.strategy == Strategy::kS2MicroBatch ||
             step.strategy == Strategy::kS2LLayerSplit) &&
            e.Waiting(step.strategy).has_value()) {
          state.taken[strategy] = {at, absl::StrCat("waiting since iteration ", e.waiting_s2_since,
                                                    " for the compute probe: ", step.reason)};
          break;
        }
        state.taken[strategy] = {at, absl::StrCat("applied at iteration ", at, ": ", step.reason)};
        break;
      }
      case EscalationStep::Action::kSkip:
        state.taken[strategy] = {step.iteration, absl::StrCat("skipped at iteration ",
                                                              step.iteration, ": ", step.reason)};
        break;
      case EscalationStep::Action::kRevert:
        state.taken[strategy] = {step.iteration, absl::StrCat("reverted at iteration ",
                                                              step.iteration, ": ", step.reason)};
        break;
      case EscalationStep::Action::kEnd:
        break;
    }
  }
  std::optional<analysis::plan::S2LMeasurement> s2l_measured;
  if (auto p = s2l_measurements_.find(ctx.job); p != s2l_measurements_.end()) {
    s2l_measured = p->second.measurement;
  }
  return mitigation::DryRun(*shape, actions.Settings(ctx.job), S2MicroBatch::SizingCulprit(ctx),
                            ctx.healthy, actions.Now(), state, s2l_measured);
}

void Orchestrator::OnJobPurged(const std::string& job) {
  for (auto it = events_.begin(); it != events_.end();) {
    if (it->second->ctx().job == job) {
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
  layouts_.erase(job);
  s2l_measurements_.erase(job);
}

void Orchestrator::RecordS2LMeasurement(const falcon::v1::DirectiveRecord& record) {
  const falcon::v1::Directive& d = record.directive();
  std::vector<absl::Status> bad;
  std::optional<analysis::plan::S2LMeasurement> m = S2LMeasurementOf(record, &bad);
  for (const absl::Status& s : bad) {
    LOG(WARNING) << "S2L measurement not read job=" << d.job() << " directive=" << d.directive_id()
                 << " where=" << metrics::where::kMitigationS2LPause << " error=\"" << s.message()
                 << "\"";
    errors_->CountError(metrics::where::kMitigationS2LPause);
  }
  if (!m.has_value()) return;  // No rank reported its pause: the settings stay.
  s2l_measurements_[d.job()] = S2LMeasured{*m, d.directive_id()};
  LOG(INFO) << "S2L pause measured job=" << d.job() << " directive=" << d.directive_id() << " "
            << S2LMeasurementText(*m);
}

}  // namespace falcon::controller::mitigation
