// Test doubles for the strategy objects: an EventActions that records every call (the job: DP=4 x
// PP=2, rank r at dp = r % 4, pp = r / 4, 32 micro-batches, node r / 2; pipeline blocks as given,
// none by default), with switches that make a call fail, and an ErrorCounter that counts per
// site.
#ifndef FALCON_CONTROLLER_MITIGATION_FAKE_EVENT_ACTIONS_H_
#define FALCON_CONTROLLER_MITIGATION_FAKE_EVENT_ACTIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error_counter.h"
#include "controller/detection/mitigation_hook.h"
#include "controller/mitigation/planner.h"

namespace falcon::controller::mitigation {

class CountingErrorCounter final : public common::ErrorCounter {
 public:
  void CountError(absl::string_view where) override { ++counts[std::string(where)]; }
  std::map<std::string, int> counts;
};

class FakeEventActions final : public detection::EventActions {
 public:
  // The job "job" with `dp` x `pp` ranks registered with their layout indices, and (when
  // `pipeline_blocks` > 0) its pipeline's blocks and their state bytes as the trainer registers
  // them.
  explicit FakeEventActions(int dp = 4, int pp = 2, int64_t global_micro_batches = 32,
                            uint32_t pipeline_blocks = 0, uint64_t block_state_bytes = 0);

  absl::Time Now() const override { return absl::FromUnixSeconds(1000); }
  const falcon::v1::Event* FindEvent(uint64_t) const override { return nullptr; }
  const registry::JobEntry* FindJob(const std::string& job) const override;
  settings::EffectiveSettings Settings(const std::string&) const override { return settings; }
  int64_t LastIteration(const std::string&) const override { return last_iteration; }
  absl::Status RecordAction(uint64_t event_id, const falcon::v1::Action& action) override;
  absl::Status MarkMitigating(uint64_t event_id, const std::string& reason) override;
  absl::Status SetMitigatedIterationTime(uint64_t event_id, absl::Duration time) override;
  absl::StatusOr<uint64_t> IssueDirective(uint64_t event_id, falcon::v1::Directive directive,
                                          const falcon::v1::Directive* rollback) override;
  const falcon::v1::DirectiveRecord* FindDirective(uint64_t directive_id) const override;
  int64_t NextEffectiveIteration(const std::string&) const override { return next_effective; }
  absl::Status SetJobPlan(
      const std::string& job, int64_t plan_version, const std::vector<uint32_t>& micro_batches,
      const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) override;
  absl::Status SetPlanCeiling(uint64_t event_id, const falcon::v1::PlanCeiling& ceiling) override;
  absl::Status CloseEvent(uint64_t event_id, const std::string& reason) override;
  absl::Status RecoverEvent(uint64_t event_id, int64_t iteration,
                            const std::string& reason) override;

  // Inputs.
  settings::EffectiveSettings settings;
  int64_t last_iteration = 100;
  int64_t next_effective = 103;  // Effective iteration of every directive issued.
  bool job_known = true;
  absl::Status fail;  // Returned by every call but FindX when not ok.

  // Recorded.
  std::vector<falcon::v1::Action> actions;
  std::vector<std::string> mitigating;
  std::vector<absl::Duration> mitigated_times;
  std::vector<falcon::v1::DirectiveRecord> directives;  // Issued, in order (id = index + 1).
  std::vector<falcon::v1::Directive> rollbacks;         // Non-null rollbacks, in order.
  std::vector<std::string> closed, recovered;
  std::vector<falcon::v1::PlanCeiling> ceilings;  // Every SetPlanCeiling, in order.

  std::unique_ptr<registry::JobEntry> job;
};

// A slow link node0 -> node1 of the fake job (ranks 0 -> 2, both in the stage-0 DP
// communicator), its job 1.5x slower.
Culprit LinkCulprit();

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_FAKE_EVENT_ACTIONS_H_
