// S2L, layer split for compute fail-slows: inside the slow rank's pipeline the slow stage gets
// fewer blocks and its pipeline peers more, and the micro-batches are re-balanced between the DP
// groups, in one directive (falcon.v1.LayerSplit; planner.h: PlanS2L, sized as S2 sizes its plan:
// S2MicroBatch::SizingCulprit, with the culprits of the job's other active events). A level
// between S2 and S3 for a job whose pipeline can be re-split (planner.h: Resplittable); not
// applicable when no block would move or the plan is not predicted 2% faster than S2 alone.
// Reverting restores the split and micro-batches in force when it was issued (S2's plan, when S2
// was in force). Its cost for the escalation is the bytes its plan moves over the s2l bandwidth
// plus the pause (CostInputs). See strategy.h and docs/algorithms.md#layer-split-planner.
#ifndef FALCON_CONTROLLER_MITIGATION_S2L_LAYER_SPLIT_H_
#define FALCON_CONTROLLER_MITIGATION_S2L_LAYER_SPLIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/plan/escalation.h"
#include "common/layer_split.h"
#include "controller/mitigation/plan_strategy.h"
#include "controller/mitigation/s2_micro_batch.h"

namespace falcon::controller::mitigation {

class S2LLayerSplit final : public PlanStrategy {
 public:
  // `s2`: the event's S2 (what S2L plans from: S2MicroBatch::PlanBase), outlives this object.
  explicit S2LLayerSplit(const S2MicroBatch* s2) : s2_(s2) {}

  analysis::plan::Strategy level() const override {
    return analysis::plan::Strategy::kS2LLayerSplit;
  }

  // kFailedPrecondition with the reason when the job is unknown, the cause is not compute, the
  // culprit is not slow, the job's pipeline cannot be re-split, no block would move, or the plan
  // is not predicted faster than S2 alone.
  absl::StatusOr<PlannedDirective> Plan(const analysis::plan::EscalationStep& step,
                                        EventContext& ctx,
                                        detection::EventActions& actions) override;
  void Restore(uint64_t directive, const JobShape* shape) override;

  // What the plan in force replaced (its revert restores them): the split of every DP group and
  // the micro-batches per DP index.
  const std::vector<common::StageBlocks>& split_before() const { return before_split_; }
  const std::vector<uint32_t>& micro_batches_before() const { return before_m_; }
  // The micro-batches the plan in force was planned from (those in force before the event).
  const std::vector<uint32_t>& base_micro_batches() const { return base_m_; }
  // S2's plan, which this plan replaced, is gone (S2 reverted while S2L in force): the revert
  // restores `m` (what S2 replaced) instead.
  void set_micro_batches_before(std::vector<uint32_t> m) { before_m_ = std::move(m); }

  // Fills what the escalation needs of S2L in `options`: s2l_resplittable (a compute culprit of
  // a job whose pipeline can be re-split), s2l_bytes_moved (of the plan S2L would issue now;
  // planned again only when its inputs change) and s2l_measured (ctx.s2l_measurements).
  void CostInputs(EventContext& ctx, detection::EventActions& actions,
                  analysis::plan::EscalationOptions* options);

 protected:
  absl::string_view what() const override { return "S2L layer split"; }
  void OnIssued(const PlannedDirective& plan, int64_t effective_iteration,
                EventContext& ctx) override;
  std::string RevertBody(EventContext& ctx, const registry::JobEntry& job,
                         falcon::v1::Directive* directive) override;

 private:
  // The micro-batches S2L plans from (S2MicroBatch::PlanBase).
  std::vector<uint32_t> PlanBase(const registry::JobEntry& job, const EventContext& ctx) const;

  const S2MicroBatch* s2_;
  std::vector<common::StageBlocks> before_split_;
  std::vector<uint32_t> before_m_, base_m_;
  // Between Plan and Issue.
  std::vector<common::StageBlocks> planned_before_split_;
  std::vector<uint32_t> planned_before_m_, planned_base_m_;
  // CostInputs' last plan: its inputs and the bytes it moves.
  std::string cost_key_;
  bool cost_resplittable_ = false;
  int64_t cost_bytes_ = 0;
};

// The number after the last "<key>=" (not part of a longer key: no letter, digit, '_', '.' or '-'
// before it) of an ack reason, from its first non-blank up to the next ';' or whitespace (the
// trainer ends its S2L and S3 acks with "...; bytes_moved=<n>; move_s=<s>; pause_s=<s>").
// nullopt when the reason has no such key; kInvalidArgument naming the key when the value is not
// a finite number in [0, max].
absl::StatusOr<std::optional<double>> AckNumber(absl::string_view reason, absl::string_view key,
                                                double max);

// What an APPLIED layer split's acks measured (the job's S2L cost from then on: S2LCost). Of the
// acks that report a pause (pause_s), the slowest rank's (of equal pauses, the one with the most
// beside its move): its pause less its move (move_s; 0 when it reports none; a move reported
// longer than its pause is cut to it, and said in `bad`) is the pause; the plan's bytes
// (bytes_moved) over the longest move reported is the bandwidth (unset when no bytes moved or no
// move took time; clamped into [1e3, 1e13] bytes/s). nullopt when no ack reports a pause. An ack
// with a malformed figure is left out and its error (naming the rank and the key) appended to
// `bad`.
std::optional<analysis::plan::S2LMeasurement> S2LMeasurementOf(
    const falcon::v1::DirectiveRecord& record, std::vector<absl::Status>* bad);

// "pause_s=0.25 bandwidth_bytes_per_s=2e+07" ("...=unmeasured" without a rate): how the
// controller's log lines show a measurement.
std::string S2LMeasurementText(const analysis::plan::S2LMeasurement& m);

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_S2L_LAYER_SPLIT_H_
