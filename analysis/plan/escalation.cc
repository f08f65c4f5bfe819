#include "analysis/plan/escalation.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace falcon::analysis::plan {
namespace {

std::string Secs(absl::Duration d) { return absl::StrFormat("%.2fs", absl::ToDoubleSeconds(d)); }

bool Contains(const std::vector<Strategy>& v, Strategy s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

absl::Status CheckDuration(absl::Duration d, absl::Duration max, absl::string_view field) {
  if (d < absl::ZeroDuration() || d > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be in [0, ", Secs(max), "], got ", absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

}  // namespace

int EscalationRank(Strategy strategy) {
  for (int i = 0; i < static_cast<int>(std::size(kEscalationOrder)); ++i) {
    if (kEscalationOrder[i] == strategy) return i;
  }
  return -1;
}

absl::Duration S2LCost(int64_t bytes_moved, double bandwidth_setting_bytes_per_s,
                       absl::Duration pause_setting, const std::optional<S2LMeasurement>& measured,
                       std::string* why) {
  const bool measured_bw = measured.has_value() && measured->bandwidth_bytes_per_s.has_value();
  const double bw = measured_bw ? *measured->bandwidth_bytes_per_s : bandwidth_setting_bytes_per_s;
  const absl::Duration pause = measured.has_value() ? measured->pause : pause_setting;
  if (why != nullptr) {
    // Three significant digits: a measured pause is often milliseconds.
    *why = absl::StrFormat("%d bytes / %.3g bytes/s (%s) + pause %.3gs (%s)", bytes_moved, bw,
                           measured_bw ? "measured" : "setting", absl::ToDoubleSeconds(pause),
                           measured.has_value() ? "measured" : "setting");
  }
  if (!(bw > 0)) return absl::InfiniteDuration();  // NaN too; callers pass validated rates.
  return absl::Seconds(static_cast<double>(bytes_moved) / bw) + pause;
}

absl::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kS1Ignore:
      return "S1 ignore";
    case Strategy::kS2MicroBatch:
      return "S2 micro-batch";
    case Strategy::kS2LLayerSplit:
      return "S2L layer split";
    case Strategy::kS3Topology:
      return "S3 topology";
    case Strategy::kS4CheckpointRestart:
      return "S4 checkpoint-restart";
  }
  return "S?";
}

absl::string_view CauseName(Cause cause) {
  switch (cause) {
    case Cause::kCompute:
      return "compute";
    case Cause::kCommunication:
      return "communication";
    case Cause::kUnknown:
      return "unknown";
  }
  return "?";
}

absl::string_view ActionName(EscalationStep::Action action) {
  switch (action) {
    case EscalationStep::Action::kApply:
      return "apply";
    case EscalationStep::Action::kRevert:
      return "revert";
    case EscalationStep::Action::kSkip:
      return "skip";
    case EscalationStep::Action::kEnd:
      return "end";
  }
  return "?";
}

absl::Status EscalationOptions::Validate() const {
  if (!(s2_cost_iterations >= 0 && s2_cost_iterations <= 1e6)) {  // also rejects NaN
    return absl::InvalidArgumentError(
        absl::StrCat("s2_cost_iterations: must be in [0, 1e6], got ", s2_cost_iterations));
  }
  if (absl::Status s = CheckDuration(s3_cost, absl::Seconds(1e6), "s3_cost"); !s.ok()) return s;
  const std::pair<absl::string_view, absl::Duration> s4[] = {{"checkpoint_write", checkpoint_write},
                                                             {"checkpoint_read", checkpoint_read},
                                                             {"restart", restart}};
  for (const auto& [field, d] : s4) {
    if (absl::Status s = CheckDuration(d, absl::Seconds(1e7), field); !s.ok()) return s;
  }
  if (s2l_bytes_moved < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("s2l_bytes_moved: must be >= 0, got ", s2l_bytes_moved));
  }
  if (!(s2l_bandwidth_bytes_per_s >= 1e3 && s2l_bandwidth_bytes_per_s <= 1e13)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "s2l_bandwidth_bytes_per_s: must be in [1e3, 1e13], got ", s2l_bandwidth_bytes_per_s));
  }
  if (absl::Status s = CheckDuration(s2l_pause, absl::Seconds(1e6), "s2l_pause"); !s.ok()) {
    return s;
  }
  if (s2l_measured.has_value()) {
    if (absl::Status s =
            CheckDuration(s2l_measured->pause, absl::Seconds(1e6), "s2l_measured.pause");
        !s.ok()) {
      return s;
    }
    const std::optional<double>& bw = s2l_measured->bandwidth_bytes_per_s;
    if (bw.has_value() && !(*bw >= 1e3 && *bw <= 1e13)) {  // NaN too
      return absl::InvalidArgumentError(
          absl::StrCat("s2l_measured.bandwidth_bytes_per_s: must be in [1e3, 1e13], got ", *bw));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Escalation> Escalation::Create(const EscalationOptions& options,
                                              const common::Clock& clock) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return Escalation(options, clock);
}

absl::Duration Escalation::Cost(Strategy strategy) const {
  switch (strategy) {
    case Strategy::kS1Ignore:
      return absl::ZeroDuration();
    case Strategy::kS2MicroBatch:
      return options_.s2_cost_iterations * (slow_ - healthy_);
    case Strategy::kS2LLayerSplit:
      return S2LCost(options_.s2l_bytes_moved, options_.s2l_bandwidth_bytes_per_s,
                     options_.s2l_pause, options_.s2l_measured, nullptr);
    case Strategy::kS3Topology:
      return options_.s3_cost;
    case Strategy::kS4CheckpointRestart:
      return options_.checkpoint_write + options_.checkpoint_read + options_.restart;
  }
  return absl::InfiniteDuration();
}

bool Escalation::Enabled(Strategy s) const {
  switch (s) {
    case Strategy::kS1Ignore:
      return true;
    case Strategy::kS2MicroBatch:
      return options_.s2_enabled;
    case Strategy::kS2LLayerSplit:
      return options_.s2l_enabled;
    case Strategy::kS3Topology:
      return options_.s3_enabled;
    case Strategy::kS4CheckpointRestart:
      return options_.s4_enabled;
  }
  return false;
}

bool Escalation::IsCandidate(Strategy s) const {
  switch (cause_) {
    case Cause::kCompute:
      // S2L re-splits the slow rank's pipeline: only a pipeline with blocks to move has one.
      return s != Strategy::kS2LLayerSplit || options_.s2l_resplittable;
    case Cause::kCommunication:
      return s != Strategy::kS2MicroBatch && s != Strategy::kS2LLayerSplit;
    case Cause::kUnknown:
      // No culprit: nothing to shift work from (S2), keep off a link (S3) or leave out (S4).
      return s == Strategy::kS1Ignore;
  }
  return false;
}

std::vector<Strategy> Escalation::Ladder() const {
  std::vector<Strategy> ladder;
  // Escalation order (not the enum's): a stable sort keeps it for levels of equal cost.
  for (Strategy s : kEscalationOrder) {
    if (IsCandidate(s)) ladder.push_back(s);
  }
  std::stable_sort(ladder.begin(), ladder.end(),
                   [this](Strategy a, Strategy b) { return Cost(a) < Cost(b); });
  return ladder;
}

std::optional<Strategy> Escalation::NextCandidate() const {
  if (!active_) return std::nullopt;
  for (Strategy s : Ladder()) {
    if (Enabled(s) && !Contains(used_, s)) return s;
  }
  return std::nullopt;
}

void Escalation::Emit(EscalationStep::Action action, Strategy s, int64_t iteration,
                      absl::Duration cost, std::string reason, std::vector<EscalationStep>* out) {
  EscalationStep step;
  step.action = action;
  step.strategy = s;
  step.iteration = iteration;
  step.time = clock_->Now();
  step.lost = lost_;
  step.cost = cost;
  step.reason = std::move(reason);
  history_.push_back(step);
  out->push_back(std::move(step));
}

void Escalation::Escalate(int64_t iteration, std::vector<EscalationStep>* out) {
  while (active_) {
    const std::optional<Strategy> next = NextCandidate();
    if (!next.has_value() || lost_ < Cost(*next)) return;
    const Strategy s = *next;
    const absl::Duration cost = Cost(s);
    std::string why;
    switch (s) {
      case Strategy::kS1Ignore:
        why = "costs nothing";
        break;
      case Strategy::kS2MicroBatch:
        why =
            absl::StrFormat("%g x Δt_iter %s", options_.s2_cost_iterations, Secs(slow_ - healthy_));
        break;
      case Strategy::kS2LLayerSplit:
        S2LCost(options_.s2l_bytes_moved, options_.s2l_bandwidth_bytes_per_s, options_.s2l_pause,
                options_.s2l_measured, &why);
        break;
      case Strategy::kS3Topology:
        why = "setting";
        break;
      case Strategy::kS4CheckpointRestart:
        why = absl::StrCat("write ", Secs(options_.checkpoint_write), " + read ",
                           Secs(options_.checkpoint_read), " + restart ", Secs(options_.restart));
        break;
    }
    std::vector<std::string> disabled;
    for (Strategy c : Ladder()) {
      if (c == s) break;
      if (!Enabled(c) && !Contains(used_, c)) disabled.push_back(std::string(StrategyName(c)));
    }
    std::string reason = absl::StrCat("lost ", Secs(lost_), " >= ", StrategyName(s), " cost ",
                                      Secs(cost), " (", why, ")");
    if (!disabled.empty()) {
      absl::StrAppend(&reason, "; skipping disabled ", absl::StrJoin(disabled, ", "));
    }
    if (s == Strategy::kS1Ignore) {
      std::vector<std::string> ladder;
      for (Strategy c : Ladder()) {
        ladder.push_back(
            absl::StrCat(StrategyName(c), " ", Secs(Cost(c)), Enabled(c) ? "" : " (disabled)"));
      }
      absl::StrAppend(&reason, "; ", CauseName(cause_), " fail-slow, iteration ", Secs(slow_),
                      " vs healthy ", Secs(healthy_), "; ladder: ", absl::StrJoin(ladder, " -> "));
    }
    used_.push_back(s);
    applied_.push_back(s);
    if (s != Strategy::kS1Ignore) in_force_.push_back(s);
    Emit(EscalationStep::Action::kApply, s, iteration, cost, std::move(reason), out);
    if (s == Strategy::kS4CheckpointRestart) {
      in_force_.clear();
      active_ = false;
      Emit(EscalationStep::Action::kEnd, s, iteration, absl::ZeroDuration(),
           absl::StrCat("S4 restarts the job without the slow parts: event handled after ",
                        iterations_, " iterations, lost ", Secs(lost_)),
           out);
    }
  }
}

void Escalation::Revert(Strategy s, int64_t iteration, const std::string& why,
                        std::vector<EscalationStep>* out) {
  in_force_.erase(std::remove(in_force_.begin(), in_force_.end(), s), in_force_.end());
  Emit(EscalationStep::Action::kRevert, s, iteration, absl::ZeroDuration(),
       absl::StrCat(why, ": revert ", StrategyName(s)), out);
}

absl::StatusOr<std::vector<EscalationStep>> Escalation::StartEvent(Cause cause,
                                                                   absl::Duration healthy,
                                                                   absl::Duration slow,
                                                                   int64_t iteration) {
  if (active_) {
    return absl::FailedPreconditionError(
        absl::StrCat("an event started at iteration ", start_iteration_, " is still active"));
  }
  if (healthy <= absl::ZeroDuration() || healthy == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("healthy: must be finite and > 0, got ", absl::FormatDuration(healthy)));
  }
  if (slow <= healthy || slow == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("slow: must be finite and > healthy (",
                                                   absl::FormatDuration(healthy), "), got ",
                                                   absl::FormatDuration(slow)));
  }
  if (cause != Cause::kCompute && cause != Cause::kCommunication && cause != Cause::kUnknown) {
    return absl::InvalidArgumentError("cause: not a known cause");
  }
  active_ = true;
  cause_ = cause;
  healthy_ = healthy;
  slow_ = slow;
  lost_ = absl::ZeroDuration();
  start_iteration_ = iteration;
  iterations_ = 0;
  in_force_.clear();
  used_.clear();
  applied_.clear();
  std::vector<EscalationStep> out;
  Escalate(iteration, &out);
  return out;
}

absl::StatusOr<std::vector<EscalationStep>> Escalation::OnIteration(int64_t iteration,
                                                                    absl::Duration iteration_time) {
  if (!active_) return absl::FailedPreconditionError("no active event");
  if (iteration_time <= absl::ZeroDuration() || iteration_time == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("iteration_time: must be finite and > 0, got ",
                                                   absl::FormatDuration(iteration_time)));
  }
  ++iterations_;
  lost_ += std::max(absl::ZeroDuration(), iteration_time - healthy_);
  std::vector<EscalationStep> out;
  Escalate(iteration, &out);
  return out;
}

absl::StatusOr<std::vector<EscalationStep>> Escalation::OnCleared(int64_t iteration) {
  if (!active_) return absl::FailedPreconditionError("no active event");
  std::vector<EscalationStep> out;
  const std::string why = absl::StrCat("event cleared at iteration ", iteration);
  for (Strategy s : {Strategy::kS3Topology, Strategy::kS2LLayerSplit, Strategy::kS2MicroBatch}) {
    if (Contains(in_force_, s)) Revert(s, iteration, why, &out);
  }
  Strategy highest = Strategy::kS1Ignore;
  for (Strategy s : applied_) {
    if (EscalationRank(s) > EscalationRank(highest)) highest = s;
  }
  active_ = false;
  Emit(EscalationStep::Action::kEnd, highest, iteration, absl::ZeroDuration(),
       absl::StrCat(why, " after ", iterations_, " iterations; lost ", Secs(lost_),
                    "; highest level ", StrategyName(highest)),
       &out);
  return out;
}

absl::StatusOr<std::vector<EscalationStep>> Escalation::MarkInapplicable(Strategy strategy,
                                                                         absl::string_view why,
                                                                         int64_t iteration) {
  if (!active_) return absl::FailedPreconditionError("no active event");
  if (strategy == Strategy::kS1Ignore || !IsCandidate(strategy)) {
    return absl::InvalidArgumentError(absl::StrCat("strategy: ", StrategyName(strategy),
                                                   " is not a candidate to skip for a ",
                                                   CauseName(cause_), " fail-slow"));
  }
  std::vector<EscalationStep> out;
  in_force_.erase(std::remove(in_force_.begin(), in_force_.end(), strategy), in_force_.end());
  applied_.erase(std::remove(applied_.begin(), applied_.end(), strategy), applied_.end());
  if (!Contains(used_, strategy)) used_.push_back(strategy);
  Emit(EscalationStep::Action::kSkip, strategy, iteration, Cost(strategy),
       absl::StrCat(StrategyName(strategy), " not applicable: ", why), &out);
  Escalate(iteration, &out);
  return out;
}

absl::StatusOr<std::vector<EscalationStep>> Escalation::UpdateOptions(
    const EscalationOptions& options, int64_t iteration) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  options_ = options;
  std::vector<EscalationStep> out;
  if (!active_) return out;
  for (Strategy s : std::vector<Strategy>(in_force_.rbegin(), in_force_.rend())) {
    if (!Enabled(s))
      Revert(s, iteration, absl::StrCat(StrategyName(s), " disabled while in force"), &out);
  }
  Escalate(iteration, &out);
  return out;
}

}  // namespace falcon::analysis::plan
