#include "trainer_shim/op_record.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer_shim {

absl::Status ValidateCommunicator(const CommunicatorInfo& c, uint32_t world_size) {
  if (c.comm_id == 0) return absl::InvalidArgumentError("communicator.comm_id: must be non-zero");
  if (c.member_ranks.empty()) {
    return absl::InvalidArgumentError("communicator.member_ranks: empty");
  }
  if (!::falcon::v1::CommKind_IsValid(c.kind)) {
    return absl::InvalidArgumentError("communicator.kind: out of range");
  }
  if (c.name.size() > 128) {
    return absl::InvalidArgumentError("communicator.name: longer than 128 bytes");
  }
  absl::flat_hash_set<uint32_t> seen;
  for (size_t i = 0; i < c.member_ranks.size(); ++i) {
    const uint32_t r = c.member_ranks[i];
    if (r >= world_size) {
      return absl::InvalidArgumentError(absl::StrCat("communicator.member_ranks[", i, "]: rank ", r,
                                                     " >= world_size ", world_size));
    }
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("communicator.member_ranks[", i, "]: duplicate rank ", r));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateIterationHint(const IterationHint& h) {
  if (h.iteration < 0) return absl::InvalidArgumentError("iteration.iteration: negative");
  if (h.start_ns < 0 || h.end_ns < h.start_ns) {
    return absl::InvalidArgumentError("iteration.end_ns: need 0 <= start_ns <= end_ns");
  }
  if (h.plan_version < 0) return absl::InvalidArgumentError("iteration.plan_version: negative");
  return absl::OkStatus();
}

void ToProto(const OpRecord& r, falcon::v1::OpRecord* out) {
  out->set_comm_id(r.comm_id);
  out->set_op_kind(r.op_kind);
  out->set_bytes(r.bytes);
  out->set_peer(r.peer);
  out->set_host_start_ns(r.host_start_ns);
  out->set_host_end_ns(r.host_end_ns);
  out->set_device_duration_ns(r.device_duration_ns);
  out->set_seq(r.seq);
  out->set_iteration(r.iteration);
}

void ToProto(const CommunicatorInfo& c, falcon::v1::Communicator* out) {
  out->set_comm_id(c.comm_id);
  out->set_kind(static_cast<falcon::v1::CommKind>(c.kind));
  out->mutable_member_ranks()->Assign(c.member_ranks.begin(), c.member_ranks.end());
  out->set_name(c.name);
}

void ToProto(const IterationHint& h, falcon::v1::IterationHint* out) {
  out->set_iteration(h.iteration);
  out->set_start_ns(h.start_ns);
  out->set_end_ns(h.end_ns);
  out->set_loss(h.loss);
  out->set_plan_version(h.plan_version);
}

}  // namespace falcon::trainer_shim
