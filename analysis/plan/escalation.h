// Escalation of mitigations in the style of ski rental (FALCON paper §5, Algorithm 1;
// docs/algorithms.md#escalation).
//
// Per fail-slow event the candidates for its cause are ordered by cost (levels of equal cost in
// escalation order, EscalationRank): compute: S1 → S2 → S2L → S3 → S4 (S2L only when the job's
// pipeline can be re-split: EscalationOptions::s2l_resplittable); communication: S1 → S3 → S4 (S2
// and S2L cannot help a slow link); unknown cause: S1 only (validation named no culprit: there is
// nothing to shift work from, keep off a link or leave out). The lost
// time accumulates as Σ (t_iter − t_healthy) over the event's iterations (iterations faster than
// healthy add nothing). Whenever the lost time reaches the cost of the cheapest candidate not yet
// taken, that candidate is applied ("buy once the rent paid equals the price"); as in Algorithm 1
// the lost time is not reset, so each level is compared with the total lost so far. This is
// 2-competitive for a single level (Karlin et al.). S1 costs nothing and is taken at once.
//
// Costs (EscalationOptions): S2 = s2_cost_iterations × Δt_iter with Δt_iter = t_slow − t_healthy
// of the event (the artifact's 5 × Δt_iter); S2L = the bytes its plan moves / the bandwidth + the
// re-partition pause beside the move (each the one the job's last S2L measured, else its
// setting); S3 = a
// setting, 60 s or a measured S3 pause; S4 = checkpoint write + read + restart. When the event
// clears, S3, then S2L, then S2 are reverted if in force; S4 (a restart without the slow parts)
// ends the event. Levels can be enabled or disabled at any time; disabling a level in force
// reverts it.
//
// A pure state machine: it decides, the caller acts. Every step carries its reason and the time
// of the injected clock. Not thread-safe: one controller loop drives it.
#ifndef FALCON_ANALYSIS_PLAN_ESCALATION_H_
#define FALCON_ANALYSIS_PLAN_ESCALATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace falcon::analysis::plan {

// Mitigation strategies (the values match falcon.v1.Strategy). The numeric order is NOT the
// escalation order: S2L (layer split) sits between S2 and S3 but is numbered 5 to keep the wire
// values of the older levels; EscalationRank gives the order.
enum class Strategy {
  kS1Ignore = 1,
  kS2MicroBatch = 2,
  kS3Topology = 3,
  kS4CheckpointRestart = 4,
  kS2LLayerSplit = 5,
};

// Every strategy in escalation order: S1, S2, S2L, S3, S4.
inline constexpr Strategy kEscalationOrder[] = {Strategy::kS1Ignore, Strategy::kS2MicroBatch,
                                                Strategy::kS2LLayerSplit, Strategy::kS3Topology,
                                                Strategy::kS4CheckpointRestart};
// The position of `strategy` in kEscalationOrder (S1 0 ... S4 4): the order of levels of equal
// cost, and which of two levels is the higher one.
int EscalationRank(Strategy strategy);

// Root cause of a fail-slow (the values match falcon.v1.Cause).
enum class Cause { kCompute = 1, kCommunication = 2, kUnknown = 3 };

// "S1 ignore", "S2 micro-batch", "S2L layer split", "S3 topology", "S4 checkpoint-restart".
absl::string_view StrategyName(Strategy strategy);
// "compute", "communication", "unknown".
absl::string_view CauseName(Cause cause);

// What the job's last S2L measured (the slowest rank of its APPLIED acks): the pause beside the
// move of its blocks (pause_s - move_s: agreeing on the boundary, rebuilding the gradient groups)
// and the rate its blocks moved at (bytes_moved / move_s).
struct S2LMeasurement {
  absl::Duration pause;  // [0, 1e6 s].
  // [1e3, 1e13] bytes/s; unset when that S2L moved no bytes or took no measurable time moving.
  std::optional<double> bandwidth_bytes_per_s;
  bool operator==(const S2LMeasurement& o) const {
    return pause == o.pause && bandwidth_bytes_per_s == o.bandwidth_bytes_per_s;
  }
};

// S2L's cost: `bytes_moved` over the bandwidth plus the pause, each the measured one when
// `measured` has it, else the setting (infinite for a bandwidth that is not > 0). `why` (may be
// null) gets how, e.g. "100608 bytes / 2.5e+07 bytes/s (measured) + pause 0.01s (measured)".
absl::Duration S2LCost(int64_t bytes_moved, double bandwidth_setting_bytes_per_s,
                       absl::Duration pause_setting, const std::optional<S2LMeasurement>& measured,
                       std::string* why);

struct EscalationOptions {
  bool s2_enabled = true;  // Default true; changeable at run time (UpdateOptions).
  bool s3_enabled = true;
  bool s4_enabled = true;
  // S2 cost in units of the event's per-iteration loss Δt_iter, [0, 1e6]. Default 5.
  double s2_cost_iterations = 5.0;
  // S3 cost: a measured S3 pause when known, else the paper's 60 s. [0, 1e6 s].
  absl::Duration s3_cost = absl::Seconds(60);
  // S4 cost = checkpoint_write + checkpoint_read + restart; each in [0, 1e7 s]. The defaults
  // add up to 600 s.
  absl::Duration checkpoint_write = absl::Seconds(295);
  absl::Duration checkpoint_read = absl::Seconds(295);
  absl::Duration restart = absl::Seconds(10);

  // S2L (layer split inside the slow pipeline, with its micro-batch plan). Default true.
  bool s2l_enabled = true;
  // Whether the job's pipeline can be re-split (pp >= 2 and a known block count above pp): S2L is
  // a candidate for compute fail-slows only then. Filled by the caller from the job; default
  // false.
  bool s2l_resplittable = false;
  // S2L cost = s2l_bytes_moved / bandwidth + pause (S2LCost): the bandwidth and the pause the
  // job's last S2L measured (s2l_measured) when known, else the settings below.
  // Bytes the S2L plan moves (Σ over the blocks that change stage of a block's state), >= 0;
  // filled by the caller from its plan. Default 0.
  int64_t s2l_bytes_moved = 0;
  // Bytes per second the blocks move at when none was measured, in [1e3, 1e13]. Default 1e9.
  double s2l_bandwidth_bytes_per_s = 1e9;
  // The re-partition pause (beside the move) when none was measured, [0, 1e6 s]. Default 1 s.
  absl::Duration s2l_pause = absl::Seconds(1);
  // What the job's last S2L measured (its APPLIED acks); unset: none yet.
  std::optional<S2LMeasurement> s2l_measured;

  // kInvalidArgument naming the field when a value is out of range.
  absl::Status Validate() const;
};

// One decision.
struct EscalationStep {
  enum class Action {
    kApply,   // Apply `strategy` (S1: keep going).
    kRevert,  // Undo `strategy` (S2/S2L/S3): the event cleared or the level was disabled.
    kSkip,    // The caller could not apply `strategy` (MarkInapplicable); it is dropped.
    kEnd,     // The event is over (cleared, or handled by S4).
  };
  Action action = Action::kApply;
  // For kEnd: the highest level (EscalationRank) applied and not skipped afterwards (S1 when
  // every higher one was skipped).
  Strategy strategy = Strategy::kS1Ignore;
  int64_t iteration = 0;  // The caller's iteration when decided.
  absl::Time time;        // The clock's Now() when decided.
  absl::Duration lost;    // Lost time accumulated so far.
  absl::Duration cost;    // The strategy's cost (kApply, kSkip).
  std::string reason;     // Why, for humans and logs; never empty.
};

// "apply", "revert", "skip", "end".
absl::string_view ActionName(EscalationStep::Action action);

class Escalation {
 public:
  // kInvalidArgument when `options` do not validate. `clock` must outlive the object.
  static absl::StatusOr<Escalation> Create(const EscalationOptions& options,
                                           const common::Clock& clock);

  // Starts an event at `iteration`: healthy and slow iteration times as the detector measured
  // them. Returns the first steps (S1 at once). kFailedPrecondition while an event is active;
  // kInvalidArgument unless 0 < healthy < slow (finite).
  absl::StatusOr<std::vector<EscalationStep>> StartEvent(Cause cause, absl::Duration healthy,
                                                         absl::Duration slow, int64_t iteration);

  // One iteration of the active event took `iteration_time`: adds its loss and escalates as far
  // as the lost time pays for. kFailedPrecondition without an active event; kInvalidArgument for
  // a non-positive or infinite time.
  absl::StatusOr<std::vector<EscalationStep>> OnIteration(int64_t iteration,
                                                          absl::Duration iteration_time);

  // The event cleared: reverts S3, S2L and S2 (in that order) if in force, then ends it.
  // kFailedPrecondition without an active event.
  absl::StatusOr<std::vector<EscalationStep>> OnCleared(int64_t iteration);

  // The caller could not apply `strategy` (for example S2 found no better plan): drops it for
  // this event and escalates further if the lost time already pays for the next level.
  // kFailedPrecondition without an active event; kInvalidArgument for S1 or a strategy that is
  // not a candidate for the event's cause.
  absl::StatusOr<std::vector<EscalationStep>> MarkInapplicable(Strategy strategy,
                                                               absl::string_view why,
                                                               int64_t iteration);

  // New settings at run time (for example a measured S3 cost or a level disabled). Reverts a
  // level in force that is now disabled, then escalates if the new costs allow. Works with or
  // without an active event (then returns no steps). kInvalidArgument when options do not
  // validate.
  absl::StatusOr<std::vector<EscalationStep>> UpdateOptions(const EscalationOptions& options,
                                                            int64_t iteration);

  bool active() const { return active_; }
  Cause cause() const { return cause_; }
  absl::Duration lost() const { return lost_; }
  const EscalationOptions& options() const { return options_; }
  // Strategies above S1 currently in force, in the order applied.
  const std::vector<Strategy>& in_force() const { return in_force_; }
  // The cost of `strategy` for the active (or last) event.
  absl::Duration Cost(Strategy strategy) const;
  // The cheapest candidate not taken yet, if any.
  std::optional<Strategy> NextCandidate() const;
  // Every step since creation, in order.
  const std::vector<EscalationStep>& history() const { return history_; }

 private:
  Escalation(const EscalationOptions& options, const common::Clock& clock)
      : options_(options), clock_(&clock) {}

  bool Enabled(Strategy s) const;
  bool IsCandidate(Strategy s) const;    // for the cause, regardless of state
  std::vector<Strategy> Ladder() const;  // candidates for the cause, cheapest first
  void Emit(EscalationStep::Action action, Strategy s, int64_t iteration, absl::Duration cost,
            std::string reason, std::vector<EscalationStep>* out);
  void Escalate(int64_t iteration, std::vector<EscalationStep>* out);
  void Revert(Strategy s, int64_t iteration, const std::string& why,
              std::vector<EscalationStep>* out);

  EscalationOptions options_;
  const common::Clock* clock_;
  bool active_ = false;
  Cause cause_ = Cause::kUnknown;
  absl::Duration healthy_;
  absl::Duration slow_;
  absl::Duration lost_;
  int64_t start_iteration_ = 0;
  int64_t iterations_ = 0;
  std::vector<Strategy> in_force_;
  std::vector<Strategy> used_;     // applied or skipped during this event
  std::vector<Strategy> applied_;  // applied during this event and not skipped since
  std::vector<EscalationStep> history_;
};

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_ESCALATION_H_
