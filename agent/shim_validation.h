// Field checks for messages a shim sends the agent (proto/falcon/v1/shim.proto). Each returns
// kInvalidArgument whose message is "<dotted field path>: <what is wrong>", e.g.
// "op_batch.records[3].host_end_ns: before host_start_ns"; ToFieldError turns it into the
// AgentToShim.error the shim gets back. Pure functions; thread-safe.
#ifndef FALCON_AGENT_SHIM_VALIDATION_H_
#define FALCON_AGENT_SHIM_VALIDATION_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/shim.pb.h"

namespace falcon::agent {

inline constexpr uint32_t kMaxWorldSize = 1048576;
inline constexpr int kMaxOpsPerShimBatch = 65536;
inline constexpr uint64_t kMaxOpBytes = uint64_t{1} << 40;
inline constexpr int64_t kMaxIterationTimeNs = int64_t{3600} * 1000 * 1000 * 1000;

// ShimHello: job, rank (node, pid, rank < world_size), world_size, layout indices, the pipeline
// shape (common::ValidatePipelineShape: pipeline_blocks 0 or [max(pp_size, 1), 4096],
// block_state_bytes <= 2^50).
absl::Status ValidateShimHello(const v1::ShimHello& hello);

// Communicator of a rank `self_rank` in a job of `world_size` ranks: comm_id != 0, members
// non-empty, distinct, < world_size and including self_rank; name at most 128 bytes.
absl::Status ValidateCommunicator(const v1::Communicator& comm, uint32_t world_size,
                                  uint32_t self_rank);

// Context an op batch is checked against.
struct OpBatchContext {
  uint32_t world_size = 0;
  uint32_t self_rank = 0;
  uint64_t last_op_seq = 0;  // Highest OpRecord.seq accepted so far on this rank (0: none).
};

// OpBatch: sequence > 0, at most 65536 records, each on a registered communicator this rank is a
// member of, with a valid op kind, bytes <= 2^40, a peer that is a member (SEND/RECV) or -1
// (collectives), 0 <= host_start_ns <= host_end_ns, device_duration_ns >= 0, seq strictly
// increasing (also across batches) and iteration >= -1. `find_comm` returns the registered
// communicator with an id, or nullptr.
absl::Status ValidateOpBatch(const v1::OpBatch& batch, const OpBatchContext& ctx,
                             absl::FunctionRef<const v1::Communicator*(uint64_t)> find_comm);

// IterationHint: iteration > `last_iteration` (pass -1 when none), 0 <= start_ns <= end_ns,
// end_ns - start_ns <= one hour, plan_version >= 0.
absl::Status ValidateIterationHint(const v1::IterationHint& hint, int64_t last_iteration);

// DirectiveAck from the session of (`job`, `rank`).
absl::Status ValidateDirectiveAck(const v1::DirectiveAck& ack, absl::string_view job,
                                  uint32_t rank);

// ValidationResult from the session of (`job`, `rank`).
absl::Status ValidateValidationResult(const v1::ValidationResult& result, absl::string_view job,
                                      uint32_t rank);

// "field: message" -> FieldError{field, message}; a message without ": " goes whole into
// `message` with field "msg".
v1::FieldError ToFieldError(const absl::Status& status);

}  // namespace falcon::agent

#endif  // FALCON_AGENT_SHIM_VALIDATION_H_
