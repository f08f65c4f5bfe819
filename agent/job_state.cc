#include "agent/job_state.h"

namespace falcon::agent {

bool JobState::Profiling(uint32_t rank, int64_t now_ns) const {
  if (profile_all.ActiveAt(now_ns)) return true;
  auto it = ranks.find(rank);
  return it != ranks.end() && it->second.profiling.ActiveAt(now_ns);
}

size_t JobState::LiveSessions() const {
  size_t n = 0;
  for (const auto& [rank, r] : ranks) n += r.session_id != 0;
  return n;
}

v1::JobRegistration JobState::Registration() const {
  v1::JobRegistration reg;
  reg.set_job(name);
  reg.set_world_size(world_size);
  for (const auto& [rank, r] : ranks) *reg.add_ranks() = r.info;
  for (const auto& [id, c] : comms) *reg.add_communicators() = c;
  reg.set_dp_size(dp_size);
  reg.set_pp_size(pp_size);
  reg.set_tp_size(tp_size);
  reg.set_global_micro_batches(global_micro_batches);
  reg.set_pipeline_blocks(pipeline_blocks);
  reg.set_block_state_bytes(block_state_bytes);
  reg.set_epoch(epoch);
  return reg;
}

}  // namespace falcon::agent
