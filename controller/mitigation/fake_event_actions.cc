#include "controller/mitigation/fake_event_actions.h"

#include <utility>

namespace falcon::controller::mitigation {

FakeEventActions::FakeEventActions(int dp, int pp, int64_t global_micro_batches,
                                   uint32_t pipeline_blocks, uint64_t block_state_bytes) {
  // A job that registers its blocks is one whose S2L the tests exercise: it opts in.
  settings.s2l_enabled = pipeline_blocks > 0;
  falcon::controller::v1::JobRecord record;
  falcon::v1::JobRegistration* reg = record.add_agents()->mutable_registration();
  reg->set_job("job");
  reg->set_world_size(dp * pp);
  reg->set_dp_size(dp);
  reg->set_pp_size(pp);
  reg->set_tp_size(1);
  reg->set_global_micro_batches(global_micro_batches);
  reg->set_pipeline_blocks(pipeline_blocks);
  reg->set_block_state_bytes(block_state_bytes);
  for (int r = 0; r < dp * pp; ++r) {
    falcon::v1::RankInfo* info = reg->add_ranks();
    info->set_rank(r);
    info->set_node("node" + std::to_string(r / 2));
    info->set_dp_index(r % dp);
    info->set_pp_index(r / dp);
    info->set_tp_index(0);
  }
  job = std::make_unique<registry::JobEntry>(std::move(record));
}

const registry::JobEntry* FakeEventActions::FindJob(const std::string& name) const {
  return job_known && name == job->name() ? job.get() : nullptr;
}

absl::Status FakeEventActions::RecordAction(uint64_t, const falcon::v1::Action& action) {
  if (!fail.ok()) return fail;
  actions.push_back(action);
  return absl::OkStatus();
}

absl::Status FakeEventActions::MarkMitigating(uint64_t, const std::string& reason) {
  if (!fail.ok()) return fail;
  mitigating.push_back(reason);
  return absl::OkStatus();
}

absl::Status FakeEventActions::SetMitigatedIterationTime(uint64_t, absl::Duration time) {
  if (!fail.ok()) return fail;
  mitigated_times.push_back(time);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FakeEventActions::IssueDirective(uint64_t event_id,
                                                          falcon::v1::Directive directive,
                                                          const falcon::v1::Directive* rollback) {
  if (!fail.ok()) return fail;
  falcon::v1::DirectiveRecord r;
  r.set_event_id(event_id);
  directive.set_directive_id(directives.size() + 1);
  directive.set_job(job->name());
  directive.set_effective_iteration(next_effective);
  *r.mutable_directive() = std::move(directive);
  r.set_state(falcon::v1::DirectiveRecord::STATE_PENDING);
  directives.push_back(std::move(r));
  if (rollback != nullptr) rollbacks.push_back(*rollback);
  return directives.size();
}

const falcon::v1::DirectiveRecord* FakeEventActions::FindDirective(uint64_t id) const {
  return id >= 1 && id <= directives.size() ? &directives[id - 1] : nullptr;
}

absl::Status FakeEventActions::SetJobPlan(
    const std::string&, int64_t plan_version, const std::vector<uint32_t>& micro_batches,
    const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) {
  if (!fail.ok()) return fail;
  job->set_plan(plan_version, micro_batches);
  job->set_layer_split(layer_split);
  return absl::OkStatus();
}

absl::Status FakeEventActions::SetPlanCeiling(uint64_t, const falcon::v1::PlanCeiling& ceiling) {
  if (!fail.ok()) return fail;
  ceilings.push_back(ceiling);
  return absl::OkStatus();
}

absl::Status FakeEventActions::CloseEvent(uint64_t, const std::string& reason) {
  if (!fail.ok()) return fail;
  closed.push_back(reason);
  return absl::OkStatus();
}

absl::Status FakeEventActions::RecoverEvent(uint64_t, int64_t, const std::string& reason) {
  if (!fail.ok()) return fail;
  recovered.push_back(reason);
  return absl::OkStatus();
}

Culprit LinkCulprit() {
  Culprit c;
  c.cause = falcon::v1::CAUSE_COMMUNICATION;
  falcon::v1::Link l;
  l.set_src_rank(0);
  l.set_dst_rank(2);
  c.links = {l};
  c.slowdown_ratio = 1.5;
  return c;
}

}  // namespace falcon::controller::mitigation
