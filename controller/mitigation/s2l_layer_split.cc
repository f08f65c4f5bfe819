#include "controller/mitigation/s2l_layer_split.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace falcon::controller::mitigation {

absl::StatusOr<PlannedDirective> S2LLayerSplit::Plan(const analysis::plan::EscalationStep& step,
                                                     EventContext& ctx,
                                                     detection::EventActions& actions) {
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) return absl::FailedPreconditionError("job unknown");
  if (ctx.culprit.cause != falcon::v1::CAUSE_COMPUTE) {
    return absl::FailedPreconditionError("S2L helps compute fail-slows only");
  }
  if (absl::Status s = ctx.CheckNotImbalance(actions); !s.ok()) return s;
  // As S2: a culprit measured no slower than its stage peers has no stage to unload.
  if (const double probe = S2MicroBatch::ProbeRatio(ctx); probe > 0 && probe <= 1.0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the compute probe measures the culprit at x%.2f of its stage peers' compute per block: "
        "no slow stage to unload",
        probe));
  }
  absl::StatusOr<JobShape> shape = ctx.Shape(*job, PlanBase(*job, ctx));
  if (!shape.ok()) return absl::FailedPreconditionError(shape.status().message());
  // The split in force: what the plan starts from and what its revert restores.
  const std::vector<common::StageBlocks> in_force = SplitInForce(*shape);
  std::string sized_from;
  absl::StatusOr<S2LPlan> plan = PlanS2L(*shape, S2MicroBatch::SizingCulprit(ctx, &sized_from),
                                         ctx.healthy, ctx.other_culprits);
  if (!plan.ok()) return absl::FailedPreconditionError(plan.status().message());
  LOG(INFO) << "S2L plan computed " << ctx.Subject() << " split=\""
            << common::SplitText(plan->split, shape->pipeline_blocks) << "\" micro_batches=["
            << absl::StrJoin(plan->micro_batches, ",") << "] was=["
            << absl::StrJoin(shape->micro_batches, ",") << "] blocks_moved=" << plan->blocks_moved
            << " bytes_moved=" << plan->bytes_moved
            << " stage_slowdown=" << absl::StrFormat("%.2f", plan->stage_slowdown)
            << " stage_slowdown_from=" << sized_from
            << " predicted_s=" << absl::ToDoubleSeconds(plan->predicted)
            << " s2_alone_s=" << absl::ToDoubleSeconds(plan->predicted_s2)
            << " improves=" << plan->improves;
  if (!plan->improves) {
    return absl::FailedPreconditionError(absl::StrCat(
        plan->blocks_moved == 0 ? "no block would move: " : "no better than S2 alone (by 2%): ",
        plan->summary));
  }
  const int dp = shape->layout.dp_size(), pp = shape->layout.pp_size();
  PlannedDirective out;
  out.summary = plan->summary;
  out.ceiling = plan->ceiling;
  const int64_t version = job->job().plan_version() + 1;
  out.directive.set_reason(absl::StrCat(step.reason, "; ", plan->summary));
  out.directive.set_plan_version(version);
  falcon::v1::LayerSplit* split = out.directive.mutable_layer_split();
  common::SetStageBlocks(plan->split, split);
  for (uint32_t m : plan->micro_batches) split->add_micro_batches(m);
  if (absl::Status s = common::ValidateLayerSplit(*split, dp, pp, shape->pipeline_blocks,
                                                  shape->global_micro_batches);
      !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("S2L planned an invalid split: ", s.message()));
  }
  // The rollback restores the plan in force (S2's micro-batches, when S2 is in force).
  std::vector<uint32_t> m_in_force(job->job().micro_batches().begin(),
                                   job->job().micro_batches().end());
  if (static_cast<int>(m_in_force.size()) != dp) m_in_force = shape->micro_batches;
  falcon::v1::Directive& rollback = out.rollback.emplace();
  rollback.set_plan_version(version + 1);
  common::SetStageBlocks(in_force, rollback.mutable_layer_split());
  for (uint32_t m : m_in_force) rollback.mutable_layer_split()->add_micro_batches(m);
  planned_before_split_ = in_force;
  planned_before_m_ = std::move(m_in_force);
  planned_base_m_ = shape->micro_batches;
  return out;
}

std::vector<uint32_t> S2LLayerSplit::PlanBase(const registry::JobEntry& job,
                                              const EventContext& ctx) const {
  if (directive_ != 0 && !base_m_.empty()) return base_m_;
  if (s2_ != nullptr) return s2_->PlanBase(job, ctx);
  return std::vector<uint32_t>(job.job().micro_batches().begin(), job.job().micro_batches().end());
}

void S2LLayerSplit::CostInputs(EventContext& ctx, detection::EventActions& actions,
                               analysis::plan::EscalationOptions* options) {
  if (ctx.s2l_measurements != nullptr) {
    auto it = ctx.s2l_measurements->find(ctx.job);
    if (it != ctx.s2l_measurements->end()) options->s2l_measured = it->second.measurement;
  }
  if (ctx.culprit.cause != falcon::v1::CAUSE_COMPUTE) return;
  const registry::JobEntry* job = actions.FindJob(ctx.job);
  if (job == nullptr) return;
  // The shape and the plan are computed again only when what they depend on changed.
  const Culprit sizing = S2MicroBatch::SizingCulprit(ctx);
  const std::vector<uint32_t> base = PlanBase(*job, ctx);
  const bool own_layout = ctx.layouts != nullptr && ctx.layouts->count(ctx.job) > 0;
  const std::string key = absl::StrFormat(
      "%d/%d/%d/%d/%d/%d/%d/%.2f/%.2f/%s/%d/%d", job->job().plan_version(), job->epoch(),
      job->world_size(), job->parts().size(), job->job().pipeline_blocks(),
      job->job().layer_split_size(), own_layout, sizing.measured_stage_slowdown,
      sizing.slowdown_ratio, absl::StrJoin(base, ","), ctx.other_culprits.size(), directive_ != 0);
  if (key != cost_key_) {
    cost_key_ = key;
    cost_resplittable_ = false;
    cost_bytes_ = 0;
    absl::StatusOr<JobShape> shape = ctx.Shape(*job, base);
    if (shape.ok() && Resplittable(*shape)) {
      cost_resplittable_ = true;
      absl::StatusOr<S2LPlan> plan = PlanS2L(*shape, sizing, ctx.healthy, ctx.other_culprits);
      if (plan.ok()) cost_bytes_ = plan->bytes_moved;
      VLOG(1) << "S2L cost inputs " << ctx.Subject() << " bytes_moved=" << cost_bytes_ << " plan=\""
              << (plan.ok() ? plan->summary : plan.status().ToString()) << "\"";
    }
  }
  options->s2l_resplittable = cost_resplittable_;
  options->s2l_bytes_moved = cost_bytes_;
}

void S2LLayerSplit::OnIssued(const PlannedDirective& /*plan*/, int64_t effective_iteration,
                             EventContext& ctx) {
  // As S2: the probe starts over under the plan, sized meanwhile by what it measured before.
  ctx.peer_level_before_plan = ctx.probe.PeerLevel();
  if (const double r = ctx.probe.WorstCulpritRatio(S2MicroBatch::kProbeSamples); r > 0) {
    ctx.probe_ratio_before_plan = r;
  }
  ctx.probe.ClearSamples();
  before_split_ = planned_before_split_;
  before_m_ = planned_before_m_;
  base_m_ = planned_base_m_;
  ctx.measurement.Restart(effective_iteration);
}

std::string S2LLayerSplit::RevertBody(EventContext& ctx, const registry::JobEntry& job,
                                      falcon::v1::Directive* directive) {
  absl::StatusOr<JobShape> shape = ctx.Shape(job, {});
  std::vector<common::StageBlocks> split = before_split_;
  std::vector<uint32_t> m = before_m_;
  if (shape.ok()) {
    if (static_cast<int>(split.size()) != shape->layout.dp_size()) {
      split = std::vector<common::StageBlocks>(
          shape->layout.dp_size(),
          common::EvenStageBlocks(shape->pipeline_blocks, shape->layout.pp_size()));
    }
    if (m.size() != shape->micro_batches.size()) m = shape->micro_batches;
  }
  common::SetStageBlocks(split, directive->mutable_layer_split());
  for (uint32_t v : m) directive->mutable_layer_split()->add_micro_batches(v);
  const int blocks = shape.ok() ? shape->pipeline_blocks : 0;
  return absl::StrCat("layer split back to ", common::SplitText(split, blocks), ", micro-batches [",
                      absl::StrJoin(m, ", "), "]");
}

void S2LLayerSplit::Restore(uint64_t directive, const JobShape* shape) {
  MitigationStrategy::Restore(directive, shape);
  if (shape == nullptr) return;
  // After a restart: back to the even split and micro-batches (as S2 restores).
  before_split_.assign(shape->layout.dp_size(),
                       common::EvenStageBlocks(shape->pipeline_blocks, shape->layout.pp_size()));
  before_m_ = shape->micro_batches;
  base_m_ = shape->micro_batches;
}

absl::StatusOr<std::optional<double>> AckNumber(absl::string_view reason, absl::string_view key,
                                                double max) {
  const std::string needle = absl::StrCat(key, "=");
  size_t at = reason.rfind(needle);
  // A key that only ends a longer one ("xpause_s=") is not it.
  while (at != absl::string_view::npos && at > 0 &&
         (absl::ascii_isalnum(reason[at - 1]) || reason[at - 1] == '_' || reason[at - 1] == '.' ||
          reason[at - 1] == '-')) {
    at = reason.rfind(needle, at - 1);
  }
  if (at == absl::string_view::npos) return std::optional<double>();
  absl::string_view value = absl::StripLeadingAsciiWhitespace(reason.substr(at + needle.size()));
  value = value.substr(0, value.find_first_of("; \t\n"));
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v) || v < 0 || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": '", value, "' is not a number in [0, ", max, "]"));
  }
  return std::optional<double>(v);
}

std::optional<analysis::plan::S2LMeasurement> S2LMeasurementOf(
    const falcon::v1::DirectiveRecord& record, std::vector<absl::Status>* bad) {
  std::optional<double> slowest_pause_s, its_move_s, longest_move_s, bytes;
  for (const falcon::v1::DirectiveAck& ack : record.acks()) {
    if (ack.status() != falcon::v1::ACK_STATUS_APPLIED) continue;
    absl::StatusOr<std::optional<double>> pause = AckNumber(ack.reason(), "pause_s", 1e6);
    absl::StatusOr<std::optional<double>> move = AckNumber(ack.reason(), "move_s", 1e6);
    absl::StatusOr<std::optional<double>> moved = AckNumber(ack.reason(), "bytes_moved", 9e18);
    bool ok = true;
    for (const absl::Status& s : {pause.status(), move.status(), moved.status()}) {
      if (s.ok()) continue;
      ok = false;
      if (bad != nullptr) {
        bad->push_back(
            absl::InvalidArgumentError(absl::StrCat("rank ", ack.rank(), ": ", s.message())));
      }
    }
    if (!ok || !pause->has_value()) continue;
    double move_s = move->value_or(0.0);
    if (move_s > **pause) {  // The move is part of the pause: the pause stands, the move is cut.
      if (bad != nullptr) {
        bad->push_back(absl::InvalidArgumentError(absl::StrCat("rank ", ack.rank(), ": move_s ",
                                                               move_s, " exceeds pause_s ", **pause,
                                                               " (counted as the whole pause)")));
      }
      move_s = **pause;
    }
    // The slowest pause; of equal ones, the one with the most beside its move (whatever the
    // acks' order).
    if (!slowest_pause_s.has_value() || **pause > *slowest_pause_s ||
        (**pause == *slowest_pause_s && **pause - move_s > *slowest_pause_s - *its_move_s)) {
      slowest_pause_s = **pause;
      its_move_s = move_s;
    }
    if (move->has_value()) longest_move_s = std::max(longest_move_s.value_or(0.0), move_s);
    if (moved->has_value()) bytes = std::max(bytes.value_or(0.0), **moved);
  }
  if (!slowest_pause_s.has_value()) return std::nullopt;
  analysis::plan::S2LMeasurement m;
  m.pause = absl::Seconds(*slowest_pause_s - its_move_s.value_or(0.0));
  if (bytes.value_or(0) > 0 && longest_move_s.value_or(0) > 0) {
    m.bandwidth_bytes_per_s = std::clamp(*bytes / *longest_move_s, 1e3, 1e13);
  }
  return m;
}

std::string S2LMeasurementText(const analysis::plan::S2LMeasurement& m) {
  return absl::StrCat("pause_s=", absl::ToDoubleSeconds(m.pause), " bandwidth_bytes_per_s=",
                      m.bandwidth_bytes_per_s.has_value() ? absl::StrCat(*m.bandwidth_bytes_per_s)
                                                          : std::string("unmeasured"));
}

}  // namespace falcon::controller::mitigation
