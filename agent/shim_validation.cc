#include "agent/shim_validation.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/layer_split.h"
#include "common/names.h"
#include "common/op_kind.h"

namespace falcon::agent {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

bool IsMember(const v1::Communicator& comm, uint32_t rank) {
  for (uint32_t m : comm.member_ranks()) {
    if (m == rank) return true;
  }
  return false;
}

absl::Status ValidateLayoutIndex(int32_t index, uint32_t size, absl::string_view field) {
  if (index < -1) return Bad(field, "must be -1 (unknown) or a valid index");
  if (index >= 0 && size > 0 && static_cast<uint32_t>(index) >= size) {
    return Bad(field, absl::StrCat(index, " is not below the layout size ", size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateShimHello(const v1::ShimHello& hello) {
  if (absl::Status s = common::ValidateJobName(hello.job(), "hello.job"); !s.ok()) return s;
  if (!hello.has_rank()) return Bad("hello.rank", "missing");
  if (hello.world_size() < 1 || hello.world_size() > kMaxWorldSize) {
    return Bad("hello.world_size", "must be in [1, 1048576]");
  }
  const v1::RankInfo& r = hello.rank();
  if (r.rank() >= hello.world_size()) {
    return Bad("hello.rank.rank",
               absl::StrCat(r.rank(), " is not below world_size ", hello.world_size()));
  }
  if (absl::Status s = common::ValidateNodeName(r.node(), "hello.rank.node"); !s.ok()) return s;
  if (r.pid() <= 0) return Bad("hello.rank.pid", "must be > 0");
  if (r.gpu() < -1) return Bad("hello.rank.gpu", "must be -1 (CPU) or a device index");
  if (auto s = ValidateLayoutIndex(r.dp_index(), hello.dp_size(), "hello.rank.dp_index"); !s.ok())
    return s;
  if (auto s = ValidateLayoutIndex(r.pp_index(), hello.pp_size(), "hello.rank.pp_index"); !s.ok())
    return s;
  if (auto s = ValidateLayoutIndex(r.tp_index(), hello.tp_size(), "hello.rank.tp_index"); !s.ok())
    return s;
  return common::ValidatePipelineShape(hello.pipeline_blocks(), hello.block_state_bytes(),
                                       hello.pp_size(), "hello.");
}

absl::Status ValidateCommunicator(const v1::Communicator& comm, uint32_t world_size,
                                  uint32_t self_rank) {
  if (comm.comm_id() == 0) return Bad("communicator.comm_id", "must not be 0");
  if (comm.member_ranks().empty()) return Bad("communicator.member_ranks", "must not be empty");
  if (comm.name().size() > 128) return Bad("communicator.name", "longer than 128 bytes");
  if (!v1::CommKind_IsValid(comm.kind())) return Bad("communicator.kind", "unknown value");
  absl::flat_hash_set<uint32_t> seen;
  for (int i = 0; i < comm.member_ranks_size(); ++i) {
    const uint32_t m = comm.member_ranks(i);
    const std::string field = absl::StrCat("communicator.member_ranks[", i, "]");
    if (m >= world_size) {
      return Bad(field, absl::StrCat(m, " is not below world_size ", world_size));
    }
    if (!seen.insert(m).second) return Bad(field, absl::StrCat("rank ", m, " listed twice"));
  }
  if (!seen.contains(self_rank)) {
    return Bad("communicator.member_ranks", absl::StrCat("does not include this rank ", self_rank));
  }
  return absl::OkStatus();
}

absl::Status ValidateOpBatch(const v1::OpBatch& batch, const OpBatchContext& ctx,
                             absl::FunctionRef<const v1::Communicator*(uint64_t)> find_comm) {
  if (batch.sequence() == 0) return Bad("op_batch.sequence", "must be > 0");
  if (batch.records_size() > kMaxOpsPerShimBatch) {
    return Bad("op_batch.records",
               absl::StrCat(batch.records_size(), " records; at most ", kMaxOpsPerShimBatch));
  }
  uint64_t last_seq = ctx.last_op_seq;
  for (int i = 0; i < batch.records_size(); ++i) {
    const v1::OpRecord& r = batch.records(i);
    const std::string p = absl::StrCat("op_batch.records[", i, "].");
    const v1::Communicator* comm = find_comm(r.comm_id());
    if (comm == nullptr) {
      return Bad(p + "comm_id", absl::StrCat("communicator ", r.comm_id(), " is not registered"));
    }
    if (!IsMember(*comm, ctx.self_rank)) {
      return Bad(p + "comm_id",
                 absl::StrCat("rank ", ctx.self_rank, " is not a member of ", r.comm_id()));
    }
    if (r.op_kind() == v1::OP_KIND_UNSPECIFIED || !v1::OpKind_IsValid(r.op_kind())) {
      return Bad(p + "op_kind", "unspecified or unknown");
    }
    if (r.bytes() > kMaxOpBytes) return Bad(p + "bytes", "above 2^40");
    const bool p2p = common::HasPeer(r.op_kind());
    if (p2p) {
      if (r.peer() < 0 || static_cast<uint32_t>(r.peer()) >= ctx.world_size) {
        return Bad(p + "peer", absl::StrCat(r.peer(), " is not a rank of the job"));
      }
      if (static_cast<uint32_t>(r.peer()) == ctx.self_rank) {
        return Bad(p + "peer", "must differ from the rank itself");
      }
      if (!IsMember(*comm, static_cast<uint32_t>(r.peer()))) {
        return Bad(p + "peer",
                   absl::StrCat("rank ", r.peer(), " is not a member of ", r.comm_id()));
      }
    } else if (r.peer() != -1) {
      return Bad(p + "peer", "must be -1 for collectives");
    }
    if (r.host_start_ns() < 0) return Bad(p + "host_start_ns", "must be >= 0");
    if (r.host_end_ns() < r.host_start_ns()) return Bad(p + "host_end_ns", "before host_start_ns");
    if (r.device_duration_ns() < 0) return Bad(p + "device_duration_ns", "must be >= 0");
    if (r.seq() <= last_seq) {
      return Bad(p + "seq", absl::StrCat(r.seq(), " does not increase (last ", last_seq, ")"));
    }
    last_seq = r.seq();
    if (r.iteration() < -1) return Bad(p + "iteration", "must be >= -1");
  }
  return absl::OkStatus();
}

absl::Status ValidateIterationHint(const v1::IterationHint& hint, int64_t last_iteration) {
  if (hint.iteration() < 0) return Bad("iteration.iteration", "must be >= 0");
  if (hint.iteration() <= last_iteration) {
    return Bad("iteration.iteration",
               absl::StrCat(hint.iteration(), " does not increase (last ", last_iteration, ")"));
  }
  if (hint.start_ns() < 0) return Bad("iteration.start_ns", "must be >= 0");
  if (hint.end_ns() < hint.start_ns()) return Bad("iteration.end_ns", "before start_ns");
  if (hint.end_ns() - hint.start_ns() > kMaxIterationTimeNs) {
    return Bad("iteration.end_ns", "iteration longer than one hour");
  }
  if (hint.plan_version() < 0) return Bad("iteration.plan_version", "must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateDirectiveAck(const v1::DirectiveAck& ack, absl::string_view job,
                                  uint32_t rank) {
  if (ack.directive_id() == 0) return Bad("directive_ack.directive_id", "must be > 0");
  if (ack.job() != job) {
    return Bad("directive_ack.job",
               absl::StrCat("'", ack.job(), "' is not this session's job '", job, "'"));
  }
  if (ack.rank() != rank) {
    return Bad("directive_ack.rank",
               absl::StrCat(ack.rank(), " is not this session's rank ", rank));
  }
  if (ack.status() == v1::ACK_STATUS_UNSPECIFIED || !v1::AckStatus_IsValid(ack.status())) {
    return Bad("directive_ack.status", "unspecified or unknown");
  }
  if (ack.status() == v1::ACK_STATUS_REJECTED && ack.reason().empty()) {
    return Bad("directive_ack.reason", "required when status is REJECTED");
  }
  if (ack.status() == v1::ACK_STATUS_APPLIED && ack.applied_iteration() < 0) {
    return Bad("directive_ack.applied_iteration", "must be >= 0 when APPLIED");
  }
  return absl::OkStatus();
}

absl::Status ValidateValidationResult(const v1::ValidationResult& result, absl::string_view job,
                                      uint32_t rank) {
  if (result.task_id() == 0) return Bad("validation_result.task_id", "must be > 0");
  if (result.job() != job) {
    return Bad("validation_result.job",
               absl::StrCat("'", result.job(), "' is not this session's job '", job, "'"));
  }
  if (result.rank() != rank) {
    return Bad("validation_result.rank",
               absl::StrCat(result.rank(), " is not this session's rank ", rank));
  }
  if (result.gemm_duration_ns() < 0) {
    return Bad("validation_result.gemm_duration_ns", "must be >= 0");
  }
  for (int i = 0; i < result.links_size(); ++i) {
    if (result.links(i).duration_ns() <= 0 && result.error().empty()) {
      return Bad(absl::StrCat("validation_result.links[", i, "].duration_ns"), "must be > 0");
    }
  }
  return absl::OkStatus();
}

v1::FieldError ToFieldError(const absl::Status& status) {
  v1::FieldError error;
  absl::string_view msg = status.message();
  const size_t colon = msg.find(": ");
  if (colon == absl::string_view::npos ||
      msg.substr(0, colon).find(' ') != absl::string_view::npos) {
    error.set_field("msg");
    error.set_message(std::string(msg));
  } else {
    error.set_field(std::string(msg.substr(0, colon)));
    error.set_message(std::string(msg.substr(colon + 2)));
  }
  return error;
}

}  // namespace falcon::agent
