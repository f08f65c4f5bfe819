#include "trainer_shim/shim_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/layer_split.h"
#include "common/names.h"

namespace falcon::trainer_shim {

absl::Status ShimOptions::Validate() const {
  if (absl::Status s = common::ValidateJobName(job, "options.job"); !s.ok()) return s;
  if (world_size < 1 || world_size > 1048576) {
    return absl::InvalidArgumentError("options.world_size: need [1, 1048576]");
  }
  if (rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.rank: ", rank, " >= world_size ", world_size));
  }
  if (ring_capacity < 2) return absl::InvalidArgumentError("options.ring_capacity: need >= 2");
  if (max_batch_records < 1 || max_batch_records > 65536) {
    return absl::InvalidArgumentError("options.max_batch_records: need [1, 65536]");
  }
  if (max_buffered_records < max_batch_records) {
    return absl::InvalidArgumentError("options.max_buffered_records: need >= max_batch_records");
  }
  if (max_pending_hints < 1) {
    return absl::InvalidArgumentError("options.max_pending_hints: need >= 1");
  }
  if (flush_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.flush_interval: need > 0");
  }
  if (connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.connect_timeout: need > 0");
  }
  if (welcome_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.welcome_timeout: need > 0");
  }
  if (shutdown_flush_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.shutdown_flush_timeout: need >= 0");
  }
  if (absl::Status s = common::Backoff::Validate(reconnect_backoff, "options.reconnect_backoff.");
      !s.ok()) {
    return s;
  }
  if (dp_index < -1 || pp_index < -1 || tp_index < -1 || gpu < -1) {
    return absl::InvalidArgumentError("options.{dp,pp,tp}_index/gpu: need >= -1");
  }
  if (absl::Status s =
          common::ValidatePipelineShape(pipeline_blocks, block_state_bytes, pp_size, "options.");
      !s.ok()) {
    return s;
  }
  if (absl::StartsWith(agent_socket, "unix:") && agent_socket.size() == 5) {
    return absl::InvalidArgumentError("options.agent_socket: 'unix:' without a path");
  }
  return absl::OkStatus();
}

std::string ShimOptions::AgentTarget() const {
  if (agent_socket.empty() || absl::StartsWith(agent_socket, "unix:")) return agent_socket;
  return absl::StrCat("unix:", agent_socket);
}

}  // namespace falcon::trainer_shim
