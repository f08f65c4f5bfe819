#include "controller/mitigation/orchestrator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/plan/escalation.h"

namespace falcon::controller::mitigation {

using analysis::EscalationStep;
using analysis::Strategy;

struct Orchestrator::EventState {
  uint64_t event_id = 0;
  std::string job;
  Culprit culprit;
  absl::Duration healthy;
  absl::Duration slow;
  std::optional<analysis::Escalation> esc;
  bool rebuilding = false;
  bool ended = false;
  int64_t last_iteration = -1;
  // Plans in force (directive ids; 0 none) and what they replaced.
  uint64_t s2_directive = 0;
  bool s2_dry = false;
  std::vector<uint32_t> before_s2;
  uint64_t s3_directive = 0;
  bool s3_dry = false;
  analysis::Layout before_s3;
  uint64_t s4_directive = 0;
  // Measurement of the plan in force.
  int64_t measure_from = -1;
  std::vector<int64_t> measured_ns;
  bool judged = false;
  // Per-rank compute probe (compute culprits): recent compute time per micro-batch (ns) per rank.
  // Before S2 it measures the culprit's stage slowdown for the plan; under S2 it tells when the
  // fault cleared (the plan hides that from the job's iteration time).
  std::map<uint32_t, std::vector<double>> per_micro_batch;
  std::vector<int> rank_dp, rank_pp;  // From the layout when the probe started.
  std::vector<uint32_t> even_split;   // Micro-batches per DP index when the job has no plan.
  bool probe_saw_slow = false;
  int clear_streak = 0;
};

namespace {

double Median(std::vector<double> x) {
  std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
  return x[x.size() / 2];
}

analysis::Cause ToCause(falcon::v1::Cause c) {
  switch (c) {
    case falcon::v1::CAUSE_COMPUTE:
      return analysis::Cause::kCompute;
    case falcon::v1::CAUSE_COMMUNICATION:
      return analysis::Cause::kCommunication;
    default:
      return analysis::Cause::kUnknown;
  }
}

falcon::v1::Strategy ToProto(Strategy s) { return static_cast<falcon::v1::Strategy>(s); }

bool SameOptions(const analysis::EscalationOptions& a, const analysis::EscalationOptions& b) {
  return a.s2_enabled == b.s2_enabled && a.s3_enabled == b.s3_enabled &&
         a.s4_enabled == b.s4_enabled && a.s2_cost_iterations == b.s2_cost_iterations &&
         a.s3_cost == b.s3_cost && a.checkpoint_write == b.checkpoint_write &&
         a.checkpoint_read == b.checkpoint_read && a.restart == b.restart;
}

int64_t Median(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

double Orchestrator::ProbeRatio(const EventState& st, uint32_t rank, size_t min_samples) {
  auto it = st.per_micro_batch.find(rank);
  if (it == st.per_micro_batch.end() || it->second.size() < min_samples) return 0;
  std::vector<double> peers;
  for (const auto& [r, samples] : st.per_micro_batch) {
    if (r == rank || samples.size() < 3 || st.rank_pp[r] != st.rank_pp[rank]) continue;
    if (std::find(st.culprit.ranks.begin(), st.culprit.ranks.end(), r) != st.culprit.ranks.end()) {
      continue;
    }
    peers.push_back(Median(samples));
  }
  if (peers.empty()) return 0;
  const double peer = Median(peers);
  return peer > 0 ? Median(it->second) / peer : 0;
}

Orchestrator::Orchestrator(OrchestratorOptions options, const common::Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

Orchestrator::~Orchestrator() = default;

analysis::EscalationOptions Orchestrator::EscalationOptionsFor(const EffectiveSettings& s) const {
  analysis::EscalationOptions o;
  o.s2_enabled = s.s2_enabled && s.mitigation_enabled;
  o.s3_enabled = s.s3_enabled && s.mitigation_enabled;
  o.s4_enabled = s.s4_enabled && s.mitigation_enabled;
  o.s2_cost_iterations = s.s2_cost_iterations;
  o.s3_cost = absl::Seconds(s.s3_cost_seconds);
  // S4 = write + read + restart; the setting is the total.
  o.checkpoint_write = absl::Seconds(s.s4_cost_seconds / 2);
  o.checkpoint_read = absl::Seconds(s.s4_cost_seconds / 2);
  o.restart = absl::ZeroDuration();
  return o;
}

Orchestrator::EventState* Orchestrator::Start(const falcon::v1::Event& event, EventActions& actions,
                                              bool rebuild) {
  const JobEntry* job = actions.FindJob(event.job());
  if (job == nullptr) return nullptr;
  auto st = std::make_unique<EventState>();
  st->event_id = event.event_id();
  st->job = event.job();
  st->culprit.cause = event.cause();
  st->culprit.ranks.assign(event.ranks().begin(), event.ranks().end());
  st->culprit.links.assign(event.links().begin(), event.links().end());
  const EffectiveSettings settings = actions.Settings(event.job());
  absl::Duration healthy = absl::Nanoseconds(event.healthy_iteration_time_ns());
  absl::Duration slow = absl::Nanoseconds(event.slow_iteration_time_ns());
  const double ratio = event.slowdown_ratio();
  if (healthy <= absl::ZeroDuration() && slow > absl::ZeroDuration() && ratio > 1) {
    healthy = slow / ratio;
  }
  if (healthy <= absl::ZeroDuration()) return nullptr;  // Nothing to measure against.
  if (slow <= healthy) {
    slow = healthy * (ratio > 1 ? ratio : 1 + std::max(0.01, settings.verification_min_ratio));
  }
  st->healthy = healthy;
  st->slow = slow;
  st->culprit.slowdown_ratio = absl::FDivDuration(slow, healthy);
  absl::StatusOr<analysis::Escalation> esc =
      analysis::Escalation::Create(EscalationOptionsFor(settings), *clock_);
  if (!esc.ok()) return nullptr;  // Settings are validated; cannot happen.
  st->esc.emplace(*std::move(esc));
  const int64_t iteration = std::max(event.verdict_iteration(), actions.LastIteration(event.job()));
  st->last_iteration = iteration;
  if (rebuild) {
    // Plans in force from the event's log (the controller restarted).
    st->rebuilding = true;
    for (const falcon::v1::Action& a : event.actions()) {
      if (a.dry_run() || a.directive_id() == 0) continue;
      uint64_t& slot = a.strategy() == falcon::v1::STRATEGY_S2_MICRO_BATCH ? st->s2_directive
                       : a.strategy() == falcon::v1::STRATEGY_S3_TOPOLOGY  ? st->s3_directive
                                                                           : st->s4_directive;
      slot = a.revert() ? 0 : a.directive_id();
    }
    absl::StatusOr<JobShape> shape = ShapeOf(*job, nullptr, {});
    if (shape.ok()) {
      st->before_s2 = shape->micro_batches;
      st->before_s3 = shape->layout;
    }
  }
  EventState* raw = st.get();
  events_[event.event_id()] = std::move(st);
  absl::StatusOr<Steps> steps =
      raw->esc->StartEvent(ToCause(event.cause()), healthy, slow, iteration);
  if (!steps.ok()) {
    events_.erase(event.event_id());
    return nullptr;
  }
  Steps all = *std::move(steps);
  // The time lost between onset and verdict counts at once.
  if (event.lost_seconds() > 0) {
    absl::StatusOr<Steps> more =
        raw->esc->OnIteration(iteration, healthy + absl::Seconds(event.lost_seconds()));
    if (more.ok()) all.insert(all.end(), more->begin(), more->end());
  }
  Execute(*raw, all, actions);
  raw->rebuilding = false;
  return raw;
}

void Orchestrator::Record(EventState& st, falcon::v1::Strategy strategy, uint64_t directive_id,
                          int64_t iteration, const std::string& reason, bool revert,
                          EventActions& actions) {
  if (st.rebuilding) return;  // Already in the event's log.
  falcon::v1::Action a;
  a.set_strategy(strategy);
  a.set_directive_id(directive_id);
  a.set_iteration(iteration);
  a.set_time_ns(absl::ToUnixNanos(actions.Now()));
  a.set_reason(reason);
  a.set_dry_run(directive_id == 0 && strategy != falcon::v1::STRATEGY_S1_IGNORE &&
                actions.Settings(st.job).dry_run);
  a.set_revert(revert);
  actions.RecordAction(st.event_id, a).IgnoreError();  // The event may have ended meanwhile.
}

void Orchestrator::Skip(EventState& st, Strategy s, const std::string& why, int64_t iteration,
                        EventActions& actions) {
  absl::StatusOr<Steps> more = st.esc->MarkInapplicable(s, why, iteration);
  if (more.ok()) Execute(st, *more, actions);
}

void Orchestrator::Execute(EventState& st, const Steps& steps, EventActions& actions) {
  for (const EscalationStep& step : steps) {
    switch (step.action) {
      case EscalationStep::Action::kApply: {
        std::string why_not;
        bool ok = true;
        if (step.strategy == Strategy::kS1Ignore) {
          Record(st, falcon::v1::STRATEGY_S1_IGNORE, 0, step.iteration, step.reason, false,
                 actions);
        } else if (step.strategy == Strategy::kS2MicroBatch) {
          ok = ApplyS2(st, step, actions, &why_not);
        } else if (step.strategy == Strategy::kS3Topology) {
          ok = ApplyS3(st, step, actions, &why_not);
        } else {
          ApplyS4(st, step, actions);
        }
        if (!ok) Skip(st, step.strategy, why_not, step.iteration, actions);
        break;
      }
      case EscalationStep::Action::kRevert:
        Revert(st, step, actions);
        break;
      case EscalationStep::Action::kSkip:
        Record(st, ToProto(step.strategy), 0, step.iteration, absl::StrCat("skip: ", step.reason),
               false, actions);
        break;
      case EscalationStep::Action::kEnd:
        st.ended = true;
        break;
    }
  }
}

bool Orchestrator::ApplyS2(EventState& st, const EscalationStep& step, EventActions& actions,
                           std::string* why_not) {
  if (st.s2_directive != 0) return true;  // In force already (rebuilt after a restart).
  const JobEntry* job = actions.FindJob(st.job);
  if (job == nullptr) {
    *why_not = "job unknown";
    return false;
  }
  if (st.culprit.cause != falcon::v1::CAUSE_COMPUTE) {
    *why_not = "S2 helps compute fail-slows only";
    return false;
  }
  auto layout = layouts_.find(st.job);
  absl::StatusOr<JobShape> shape = ShapeOf(
      *job, layout == layouts_.end() ? nullptr : &layout->second,
      std::vector<uint32_t>(job->job().micro_batches().begin(), job->job().micro_batches().end()));
  if (!shape.ok()) {
    *why_not = std::string(shape.status().message());
    return false;
  }
  // The culprits' stage slowdown as the probe measured it (the worst culprit), when it has.
  Culprit culprit = st.culprit;
  for (uint32_t r : culprit.ranks) {
    culprit.measured_stage_slowdown =
        std::max(culprit.measured_stage_slowdown, ProbeRatio(st, r, 3));
  }
  absl::StatusOr<S2Plan> plan = PlanS2(*shape, culprit, st.healthy);
  if (!plan.ok()) {
    *why_not = std::string(plan.status().message());
    return false;
  }
  if (!plan->improves) {
    *why_not = absl::StrCat("no better micro-batch plan: ", plan->summary);
    return false;
  }
  const std::string reason = absl::StrCat(step.reason, "; ", plan->summary);
  if (actions.Settings(st.job).dry_run) {
    st.s2_dry = true;
    Record(st, falcon::v1::STRATEGY_S2_MICRO_BATCH, 0, actions.NextEffectiveIteration(st.job),
           reason, false, actions);
    return true;
  }
  const int64_t version = job->job().plan_version() + 1;
  falcon::v1::Directive d;
  d.set_reason(reason);
  d.set_plan_version(version);
  for (uint32_t m : plan->micro_batches) d.mutable_micro_batch_plan()->add_micro_batches(m);
  falcon::v1::Directive rollback;
  rollback.set_plan_version(version + 1);
  for (uint32_t m : shape->micro_batches) rollback.mutable_micro_batch_plan()->add_micro_batches(m);
  absl::StatusOr<uint64_t> id = actions.IssueDirective(st.event_id, d, &rollback);
  if (!id.ok()) {
    *why_not = std::string(id.status().message());
    return false;
  }
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  const int64_t eff = rec != nullptr ? rec->directive().effective_iteration() : step.iteration;
  actions.MarkMitigating(st.event_id, absl::StrCat("S2 micro-batch plan (directive ", *id, ")"))
      .IgnoreError();
  Record(st, falcon::v1::STRATEGY_S2_MICRO_BATCH, *id, eff, reason, false, actions);
  st.s2_directive = *id;
  st.per_micro_batch.clear();  // The probe starts over under the plan.
  st.before_s2 = shape->micro_batches;
  st.measure_from = eff;
  st.measured_ns.clear();
  st.judged = false;
  return true;
}

bool Orchestrator::ApplyS3(EventState& st, const EscalationStep& step, EventActions& actions,
                           std::string* why_not) {
  if (st.s3_directive != 0) return true;
  const JobEntry* job = actions.FindJob(st.job);
  if (job == nullptr) {
    *why_not = "job unknown";
    return false;
  }
  auto layout = layouts_.find(st.job);
  absl::StatusOr<JobShape> shape =
      ShapeOf(*job, layout == layouts_.end() ? nullptr : &layout->second, {});
  if (!shape.ok()) {
    *why_not = std::string(shape.status().message());
    return false;
  }
  absl::StatusOr<S3Plan> plan = PlanS3(*shape, st.culprit, st.healthy);
  if (!plan.ok()) {
    *why_not = std::string(plan.status().message());
    return false;
  }
  if (!plan->improves) {
    *why_not = absl::StrCat("no better layout: ", plan->summary);
    return false;
  }
  const std::string reason = absl::StrCat(step.reason, "; ", plan->summary);
  if (actions.Settings(st.job).dry_run) {
    st.s3_dry = true;
    Record(st, falcon::v1::STRATEGY_S3_TOPOLOGY, 0, actions.NextEffectiveIteration(st.job), reason,
           false, actions);
    return true;
  }
  const int64_t version = job->job().plan_version() + 1;
  falcon::v1::Directive d;
  d.set_reason(reason);
  d.set_plan_version(version);
  *d.mutable_topology_change() = plan->change;
  falcon::v1::Directive rollback;
  rollback.set_plan_version(version + 1);
  *rollback.mutable_topology_change() = ToTopologyChange(shape->layout);
  absl::StatusOr<uint64_t> id = actions.IssueDirective(st.event_id, d, &rollback);
  if (!id.ok()) {
    *why_not = std::string(id.status().message());
    return false;
  }
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  const int64_t eff = rec != nullptr ? rec->directive().effective_iteration() : step.iteration;
  actions.MarkMitigating(st.event_id, absl::StrCat("S3 topology change (directive ", *id, ")"))
      .IgnoreError();
  Record(st, falcon::v1::STRATEGY_S3_TOPOLOGY, *id, eff, reason, false, actions);
  st.s3_directive = *id;
  st.before_s3 = shape->layout;
  layouts_[st.job] = plan->layout;
  st.measure_from = eff;
  st.measured_ns.clear();
  st.judged = false;
  return true;
}

void Orchestrator::ApplyS4(EventState& st, const EscalationStep& step, EventActions& actions) {
  if (st.s4_directive != 0) return;
  const std::vector<uint32_t> excluded = S4Excluded(st.culprit);
  const std::string reason =
      absl::StrCat(step.reason, "; restart without ranks [", absl::StrJoin(excluded, ", "), "]");
  if (actions.Settings(st.job).dry_run) {
    Record(st, falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART, 0,
           actions.NextEffectiveIteration(st.job), reason, false, actions);
    return;
  }
  falcon::v1::Directive d;
  d.set_reason(reason);
  const JobEntry* job = actions.FindJob(st.job);
  d.set_plan_version((job != nullptr ? job->job().plan_version() : 0) + 1);
  d.mutable_checkpoint_restart()->set_checkpoint_dir(options_.checkpoint_dir);
  for (uint32_t r : excluded) d.mutable_checkpoint_restart()->add_excluded_ranks(r);
  absl::StatusOr<uint64_t> id = actions.IssueDirective(st.event_id, d, nullptr);
  if (!id.ok()) {
    Record(st, falcon::v1::STRATEGY_S1_IGNORE, 0, step.iteration,
           absl::StrCat("S4 not issued: ", id.status().message()), false, actions);
    return;
  }
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  actions.MarkMitigating(st.event_id, absl::StrCat("S4 checkpoint-restart (directive ", *id, ")"))
      .IgnoreError();
  Record(st, falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART, *id,
         rec != nullptr ? rec->directive().effective_iteration() : step.iteration, reason, false,
         actions);
  st.s4_directive = *id;
  st.s2_directive = st.s3_directive = 0;  // Superseded by the restart.
  layouts_.erase(st.job);
}

void Orchestrator::Revert(EventState& st, const EscalationStep& step, EventActions& actions) {
  const bool s2 = step.strategy == Strategy::kS2MicroBatch;
  uint64_t& in_force = s2 ? st.s2_directive : st.s3_directive;
  bool& dry = s2 ? st.s2_dry : st.s3_dry;
  const falcon::v1::Strategy strategy = ToProto(step.strategy);
  if (in_force == 0) {
    if (dry) {
      falcon::v1::Action a;
      a.set_strategy(strategy);
      a.set_time_ns(absl::ToUnixNanos(actions.Now()));
      a.set_iteration(step.iteration);
      a.set_reason(step.reason);
      a.set_dry_run(true);
      a.set_revert(true);
      actions.RecordAction(st.event_id, a).IgnoreError();
      dry = false;
    }
    return;
  }
  const JobEntry* job = actions.FindJob(st.job);
  if (job == nullptr) return;
  falcon::v1::Directive d;
  d.set_reverts_directive_id(in_force);
  d.set_plan_version(job->job().plan_version() + 1);
  std::string what;
  if (s2) {
    std::vector<uint32_t> m = st.before_s2;
    auto layout = layouts_.find(st.job);
    absl::StatusOr<JobShape> shape =
        ShapeOf(*job, layout == layouts_.end() ? nullptr : &layout->second, {});
    if (shape.ok() && m.size() != shape->micro_batches.size()) m = shape->micro_batches;
    for (uint32_t v : m) d.mutable_micro_batch_plan()->add_micro_batches(v);
    what = absl::StrCat("micro-batches back to [", absl::StrJoin(m, ", "), "]");
  } else {
    *d.mutable_topology_change() = ToTopologyChange(st.before_s3);
    what = "original layout";
  }
  d.set_reason(absl::StrCat(step.reason, ": ", what));
  absl::StatusOr<uint64_t> id = actions.IssueDirective(st.event_id, d, nullptr);
  if (!id.ok()) return;
  const falcon::v1::DirectiveRecord* rec = actions.FindDirective(*id);
  Record(st, strategy, *id,
         rec != nullptr ? rec->directive().effective_iteration() : step.iteration, d.reason(),
         /*revert=*/true, actions);
  if (!s2) layouts_.erase(st.job);
  in_force = 0;
}

void Orchestrator::OnVerdict(const falcon::v1::Event& event, EventActions& actions) {
  if (events_.count(event.event_id())) return;
  EventState* st = Start(event, actions, /*rebuild=*/false);
  // An S4 keeps its state until its directive closes the event.
  if (st != nullptr && st->ended && st->s4_directive == 0) events_.erase(event.event_id());
}

void Orchestrator::OnJobIteration(const falcon::v1::Event& event, int64_t iteration,
                                  absl::Duration iteration_time, EventActions& actions) {
  auto it = events_.find(event.event_id());
  EventState* st = nullptr;
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
  if (iteration <= st->last_iteration || st->ended) {
    if (st->ended && st->s4_directive == 0) events_.erase(event.event_id());
    return;
  }
  st->last_iteration = iteration;

  // Settings changed at run time (a level disabled, mitigation off, new costs).
  const analysis::EscalationOptions want = EscalationOptionsFor(actions.Settings(st->job));
  if (!SameOptions(want, st->esc->options())) {
    absl::StatusOr<Steps> steps = st->esc->UpdateOptions(want, iteration);
    if (steps.ok()) Execute(*st, *steps, actions);
  }

  // Measure the plan in force.
  const uint64_t plan = st->s3_directive != 0 ? st->s3_directive : st->s2_directive;
  if (plan != 0 && st->measure_from >= 0 && iteration > st->measure_from) {
    st->measured_ns.push_back(absl::ToInt64Nanoseconds(iteration_time));
    if (static_cast<int>(st->measured_ns.size()) > options_.measure_iterations) {
      st->measured_ns.erase(st->measured_ns.begin());
    }
    const int64_t median = Median(st->measured_ns);
    actions.SetMitigatedIterationTime(st->event_id, absl::Nanoseconds(median)).IgnoreError();
    if (!st->judged && static_cast<int>(st->measured_ns.size()) >= options_.measure_iterations) {
      st->judged = true;
      if (absl::Nanoseconds(median) >= st->slow * options_.no_help_fraction) {
        const Strategy s = st->s3_directive != 0 ? Strategy::kS3Topology : Strategy::kS2MicroBatch;
        const std::string why =
            absl::StrFormat("measured %.3f s under the plan vs slow %.3f s: it did not help",
                            static_cast<double>(median) / 1e9, absl::ToDoubleSeconds(st->slow));
        EscalationStep revert;
        revert.action = EscalationStep::Action::kRevert;
        revert.strategy = s;
        revert.iteration = iteration;
        revert.reason = why;
        Revert(*st, revert, actions);
        Skip(*st, s, why, iteration, actions);
      }
    }
  }

  absl::StatusOr<Steps> steps = st->esc->OnIteration(iteration, iteration_time);
  if (steps.ok()) Execute(*st, *steps, actions);
  if (st->ended && st->s4_directive == 0) events_.erase(event.event_id());
}

void Orchestrator::OnRankIteration(const falcon::v1::Event& event,
                                   const falcon::v1::IterationSummary& summary,
                                   EventActions& actions) {
  auto it = events_.find(event.event_id());
  if (it == events_.end()) return;
  EventState& st = *it->second;
  if (st.culprit.cause != falcon::v1::CAUSE_COMPUTE) return;
  const bool before_s2 = st.s2_directive == 0;
  if (!before_s2 && (st.measure_from < 0 || summary.iteration() < st.measure_from + 2)) return;
  const JobEntry* job = actions.FindJob(st.job);
  if (job == nullptr) return;
  if (st.rank_dp.empty()) {
    auto layout = layouts_.find(st.job);
    absl::StatusOr<JobShape> shape =
        ShapeOf(*job, layout == layouts_.end() ? nullptr : &layout->second, {});
    if (!shape.ok()) return;
    for (const analysis::RankPlacement& p : shape->layout.ranks()) {
      st.rank_dp.push_back(p.dp);
      st.rank_pp.push_back(p.pp);
    }
    st.even_split = shape->micro_batches;
  }
  const uint32_t rank = summary.rank();
  std::vector<uint32_t> m(job->job().micro_batches().begin(), job->job().micro_batches().end());
  if (m.size() != st.even_split.size()) m = st.even_split;
  if (rank >= st.rank_dp.size() || static_cast<size_t>(st.rank_dp[rank]) >= m.size() ||
      m[st.rank_dp[rank]] == 0) {
    return;
  }
  std::vector<double>& v = st.per_micro_batch[rank];
  v.push_back(static_cast<double>(summary.compute_ns()) / m[st.rank_dp[rank]]);
  if (v.size() > 5) v.erase(v.begin());
  if (before_s2) return;  // Samples for the plan's measured stage slowdown (ApplyS2).
  const bool culprit =
      std::find(st.culprit.ranks.begin(), st.culprit.ranks.end(), rank) != st.culprit.ranks.end();
  if (!culprit) return;
  const double ratio = ProbeRatio(st, rank, 5);
  if (ratio <= 0) return;
  const double min_ratio = actions.Settings(st.job).verification_min_ratio;
  if (ratio >= 1 + min_ratio) {
    st.probe_saw_slow = true;
    st.clear_streak = 0;
    return;
  }
  if (!st.probe_saw_slow || ratio >= 1 + min_ratio / 2) {
    st.clear_streak = 0;
    return;
  }
  if (++st.clear_streak < options_.clear_iterations) return;
  const int64_t iteration = summary.iteration();
  const std::string reason = absl::StrFormat(
      "rank %d compute per micro-batch back to x%.2f of its stage peers' at iteration %d (S2 in "
      "force hides the fault from the iteration time)",
      rank, ratio, iteration);
  if (!actions.RecoverEvent(st.event_id, iteration, reason).ok()) return;
  st.last_iteration = std::max(st.last_iteration, iteration);
  absl::StatusOr<Steps> steps =
      st.esc->active() ? st.esc->OnCleared(iteration) : absl::StatusOr<Steps>(Steps{});
  if (steps.ok()) Execute(st, *steps, actions);
  events_.erase(it);
}

void Orchestrator::OnRecovered(const falcon::v1::Event& event, EventActions& actions) {
  auto it = events_.find(event.event_id());
  if (it == events_.end()) {
    // A restart lost the state: rebuild what is in force from the log, then revert it.
    bool any = false;
    for (const falcon::v1::Action& a : event.actions()) any = any || a.directive_id() != 0;
    if (!any) return;
    if (Start(event, actions, /*rebuild=*/true) == nullptr) return;
    it = events_.find(event.event_id());
  }
  EventState& st = *it->second;
  const int64_t iteration = std::max(event.recovery_iteration(), st.last_iteration);
  absl::StatusOr<Steps> steps =
      st.esc->active() ? st.esc->OnCleared(iteration) : absl::StatusOr<Steps>(Steps{});
  if (steps.ok()) Execute(st, *steps, actions);
  events_.erase(it);
}

void Orchestrator::OnDirectiveState(const falcon::v1::DirectiveRecord& record,
                                    EventActions& actions) {
  const falcon::v1::Directive& d = record.directive();
  const uint64_t id = d.directive_id();
  if (record.state() == falcon::v1::DirectiveRecord::STATE_APPLIED) {
    if (d.has_micro_batch_plan()) {
      actions
          .SetJobPlan(d.job(), d.plan_version(),
                      std::vector<uint32_t>(d.micro_batch_plan().micro_batches().begin(),
                                            d.micro_batch_plan().micro_batches().end()))
          .IgnoreError();
    } else if (d.has_topology_change()) {
      const JobEntry* job = actions.FindJob(d.job());
      if (job != nullptr) {
        actions
            .SetJobPlan(d.job(), d.plan_version(),
                        std::vector<uint32_t>(job->job().micro_batches().begin(),
                                              job->job().micro_batches().end()))
            .IgnoreError();
      }
    }
  }
  auto it = events_.find(record.event_id());
  if (it == events_.end()) return;
  EventState& st = *it->second;
  const bool failed = record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED ||
                      record.state() == falcon::v1::DirectiveRecord::STATE_TIMED_OUT;
  if (id == st.s4_directive && st.s4_directive != 0) {
    if (record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED) {
      st.s4_directive = 0;
      Record(st, falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART, 0, st.last_iteration,
             absl::StrCat("S4 directive ", id, " failed: ", record.state_reason()), false, actions);
      return;
    }
    // APPLIED, or TIMED_OUT: the ranks checkpoint and exit to restart, so acks may not all come.
    actions
        .CloseEvent(st.event_id,
                    absl::StrCat("restarted without ranks [",
                                 absl::StrJoin(d.checkpoint_restart().excluded_ranks(), ", "),
                                 "] (S4, directive ", id, ")"))
        .IgnoreError();
    events_.erase(it);
    return;
  }
  if (!failed) return;
  if (id == st.s2_directive && id != 0) {
    st.s2_directive = 0;
    Skip(st, Strategy::kS2MicroBatch,
         absl::StrCat("directive ", id, " ",
                      record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED ? "rejected"
                                                                                    : "timed out",
                      ": ", record.state_reason()),
         st.last_iteration, actions);
  } else if (id == st.s3_directive && id != 0) {
    st.s3_directive = 0;
    layouts_.erase(st.job);
    Skip(st, Strategy::kS3Topology,
         absl::StrCat("directive ", id, " ",
                      record.state() == falcon::v1::DirectiveRecord::STATE_REJECTED ? "rejected"
                                                                                    : "timed out",
                      ": ", record.state_reason()),
         st.last_iteration, actions);
  }
}

}  // namespace falcon::controller::mitigation
