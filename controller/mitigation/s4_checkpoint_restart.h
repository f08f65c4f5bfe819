// S4, checkpoint-restart: every rank writes a checkpoint and the job restarts without the slow
// parts (the compute culprits; every rank of a node whose NIC is slow; every rank of the nodes
// that cover the other slow links; planner.h: S4Excluded, S4LinkCover).
// It supersedes S2/S3 and cannot be reverted: once its directive is applied (or times out, as the
// ranks exit to restart and their acks may not all come) the event is closed; a rejected S4 is
// recorded and nothing else is tried. See strategy.h and
// docs/algorithms.md#s4-checkpoint-and-restart.
#ifndef FALCON_CONTROLLER_MITIGATION_S4_CHECKPOINT_RESTART_H_
#define FALCON_CONTROLLER_MITIGATION_S4_CHECKPOINT_RESTART_H_

#include <cstdint>
#include <string>

#include "controller/mitigation/strategy.h"

namespace falcon::controller::mitigation {

class S4CheckpointRestart final : public MitigationStrategy {
 public:
  // `checkpoint_dir`: where the ranks write (relative: under the trainer's --checkpoint-dir).
  explicit S4CheckpointRestart(std::string checkpoint_dir)
      : checkpoint_dir_(std::move(checkpoint_dir)) {}

  analysis::plan::Strategy level() const override {
    return analysis::plan::Strategy::kS4CheckpointRestart;
  }

  // Always plans (an unknown job gets plan version 1).
  absl::StatusOr<PlannedDirective> Plan(const analysis::plan::EscalationStep& step,
                                        EventContext& ctx,
                                        detection::EventActions& actions) override;
  // A restart is not undone: no-op.
  void Revert(const analysis::plan::EscalationStep& /*step*/, EventContext& /*ctx*/,
              detection::EventActions& /*actions*/) override {}
  // APPLIED or TIMED_OUT: closes the event and returns true. REJECTED: records the failure.
  bool OnDirectiveState(const falcon::v1::DirectiveRecord& record, EventContext& ctx,
                        detection::EventActions& actions) override;

 protected:
  absl::string_view what() const override { return "S4 checkpoint-restart"; }
  void OnIssued(const PlannedDirective& plan, int64_t effective_iteration,
                EventContext& ctx) override;

 private:
  const std::string checkpoint_dir_;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_S4_CHECKPOINT_RESTART_H_
