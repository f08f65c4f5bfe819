// Plain records the shim takes from the trainer or the NCCL interposer: one timed op, one
// communicator, one iteration hint. They mirror falcon.v1.OpRecord / Communicator / IterationHint
// (proto/falcon/v1/common.proto, shim.proto) but are plain structs, so the hot path
// (Shim::RecordOp) copies 64 bytes into a ring buffer and never touches protobuf.
#ifndef FALCON_TRAINER_SHIM_OP_RECORD_H_
#define FALCON_TRAINER_SHIM_OP_RECORD_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "common/comm_kind.h"
#include "common/op_kind.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/shim.pb.h"

namespace falcon::trainer_shim {

// Operation kinds: the wire contract's falcon.v1.OpKind (common/op_kind.h).
using common::OpKind;

// Role hint of a communicator: the wire contract's falcon.v1.CommKind (common/comm_kind.h).
using common::CommKind;

// One timed collective or point-to-point op on this rank. Trivially copyable; 64 bytes.
struct OpRecord {
  uint64_t comm_id = 0;            // Communicator id; never 0 in a valid record.
  uint64_t bytes = 0;              // Payload this rank sends/contributes, [0, 2^40].
  int64_t host_start_ns = 0;       // CLOCK_MONOTONIC when the call started, >= 0.
  int64_t host_end_ns = 0;         // CLOCK_MONOTONIC when it completed, >= host_start_ns.
  int64_t device_duration_ns = 0;  // CUDA-event time when profiling; 0 otherwise.
  uint64_t seq = 0;                // Per-rank op sequence; assigned by Shim::RecordOp.
  int64_t iteration = -1;          // Iteration the op belongs to; -1 unknown (the shim stamps it).
  OpKind op_kind = OpKind::OP_KIND_UNSPECIFIED;
  int32_t peer = -1;  // Global peer rank for kSend/kRecv; -1 for collectives.
};
static_assert(std::is_trivially_copyable_v<OpRecord>, "OpRecord lives in a ring buffer");
static_assert(sizeof(OpRecord) == 64, "OpRecord is one cache line");

// A communicator as the trainer or interposer registers it.
struct CommunicatorInfo {
  uint64_t comm_id = 0;                         // Shared by all members; != 0.
  CommKind kind = CommKind::COMM_KIND_UNKNOWN;  // Role hint.
  std::vector<uint32_t> member_ranks;  // Global ranks in communicator-rank order; distinct.
  std::string name;                    // Optional label, <= 128 bytes.
};

// Iteration boundary hint from the trainer (falcon.v1.IterationHint).
struct IterationHint {
  int64_t iteration = 0;     // >= 0.
  int64_t start_ns = 0;      // CLOCK_MONOTONIC, >= 0.
  int64_t end_ns = 0;        // >= start_ns.
  double loss = 0;           // NaN when unknown.
  int64_t plan_version = 0;  // >= 0.
};

inline constexpr uint64_t kMaxOpBytes = uint64_t{1} << 40;

// Cheap field checks for the hot path. kInvalidArgument naming the field.
inline absl::Status ValidateOpRecord(const OpRecord& r) {
  if (r.op_kind <= OpKind::OP_KIND_UNSPECIFIED || r.op_kind > OpKind::OP_KIND_PEER_RECV) {
    return absl::InvalidArgumentError("op_record.op_kind: unspecified or out of range");
  }
  if (r.comm_id == 0) return absl::InvalidArgumentError("op_record.comm_id: must be non-zero");
  if (r.host_start_ns < 0 || r.host_end_ns < r.host_start_ns) {
    return absl::InvalidArgumentError(
        "op_record.host_end_ns: need 0 <= host_start_ns <= host_end_ns");
  }
  if (r.bytes > kMaxOpBytes) return absl::InvalidArgumentError("op_record.bytes: above 2^40");
  if (r.device_duration_ns < 0) {
    return absl::InvalidArgumentError("op_record.device_duration_ns: negative");
  }
  if (r.peer < -1) return absl::InvalidArgumentError("op_record.peer: below -1");
  if (common::IsPeerTransfer(r.op_kind) && r.peer < 0) {
    return absl::InvalidArgumentError("op_record.peer: a peer transfer needs its peer");
  }
  return absl::OkStatus();
}

// kInvalidArgument naming the field: zero id, empty/duplicate/out-of-range members, long name.
absl::Status ValidateCommunicator(const CommunicatorInfo& c, uint32_t world_size);
// kInvalidArgument: negative iteration or times, end before start, negative plan version.
absl::Status ValidateIterationHint(const IterationHint& h);

void ToProto(const OpRecord& r, falcon::v1::OpRecord* out);
void ToProto(const CommunicatorInfo& c, falcon::v1::Communicator* out);
void ToProto(const IterationHint& h, falcon::v1::IterationHint* out);

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_OP_RECORD_H_
