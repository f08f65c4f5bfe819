#include "controller/ingest/telemetry_validator.h"

#include <cmath>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/op_kind.h"
#include "common/telemetry_batch.h"
#include "controller/registry/registration_validator.h"

namespace falcon::controller::ingest {
namespace {

using falcon::v1::FieldError;

std::string At(const char* base, int i, const char* field) {
  return absl::StrCat(base, "[", i, "].", field);
}

util::MaybeFieldError CheckSummary(const falcon::v1::IterationSummary& s, int i,
                                   const registry::JobEntry& job, const IngestLimits& limits) {
  constexpr char kBase[] = "batch.iterations";
  if (job.FindRank(s.rank()) == nullptr) {
    return util::MakeFieldError(
        At(kBase, i, "rank"),
        absl::StrCat("rank ", s.rank(), " is not registered in job '", job.name(), "'"));
  }
  if (s.iteration() < 0 || s.iteration() > limits.max_iteration) {
    return util::MakeFieldError(
        At(kBase, i, "iteration"),
        absl::StrCat(s.iteration(), " is outside [0, ", limits.max_iteration, "]"));
  }
  if (s.start_ns() < 0) {
    return util::MakeFieldError(At(kBase, i, "start_ns"),
                                absl::StrCat(s.start_ns(), " is negative"));
  }
  if (s.iteration_time_ns() <= 0 || s.iteration_time_ns() > limits.max_duration_ns) {
    return util::MakeFieldError(
        At(kBase, i, "iteration_time_ns"),
        absl::StrCat(s.iteration_time_ns(), " is outside (0, ", limits.max_duration_ns, "]"));
  }
  if (s.compute_ns() < 0 || s.compute_ns() > s.iteration_time_ns()) {
    return util::MakeFieldError(At(kBase, i, "compute_ns"),
                                absl::StrCat(s.compute_ns(), " is outside [0, iteration_time_ns=",
                                             s.iteration_time_ns(), "]"));
  }
  if (s.plan_version() < 0) {
    return util::MakeFieldError(At(kBase, i, "plan_version"),
                                absl::StrCat(s.plan_version(), " is negative"));
  }
  if (s.comms_size() > static_cast<int>(limits.max_comms_per_summary)) {
    return util::MakeFieldError(
        At(kBase, i, "comms"),
        absl::StrCat(s.comms_size(), " entries exceed the limit ", limits.max_comms_per_summary));
  }
  for (int c = 0; c < s.comms_size(); ++c) {
    const falcon::v1::CommIterationSummary& cs = s.comms(c);
    std::string cp = absl::StrCat(kBase, "[", i, "].comms[", c, "].");
    const registry::CommInfo* comm = job.FindComm(cs.comm_id());
    if (comm == nullptr) {
      return util::MakeFieldError(cp + "comm_id",
                                  absl::StrCat("comm ", cs.comm_id(), " is not registered"));
    }
    if (!comm->HasMember(s.rank())) {
      return util::MakeFieldError(
          cp + "comm_id",
          absl::StrCat("rank ", s.rank(), " is not a member of comm ", cs.comm_id()));
    }
    if (cs.busy_ns() < 0 || cs.busy_ns() > limits.max_duration_ns) {
      return util::MakeFieldError(cp + "busy_ns", absl::StrCat(cs.busy_ns(), " is outside [0, ",
                                                               limits.max_duration_ns, "]"));
    }
    if (cs.wait_ns() < 0 || cs.wait_ns() > cs.busy_ns()) {
      return util::MakeFieldError(
          cp + "wait_ns",
          absl::StrCat(cs.wait_ns(), " is outside [0, busy_ns=", cs.busy_ns(), "]"));
    }
    if (cs.transfer_ns() < 0 || cs.transfer_ns() > cs.busy_ns()) {
      return util::MakeFieldError(
          cp + "transfer_ns",
          absl::StrCat(cs.transfer_ns(), " is outside [0, busy_ns=", cs.busy_ns(), "]"));
    }
  }
  return std::nullopt;
}

// One rank's op records: `rank_field` names the rank's field (batch.op_rank or
// batch.rank_ops[k].rank), `ops_field` the records' (batch.ops or batch.rank_ops[k].ops).
util::MaybeFieldError CheckRankOps(
    uint32_t rank, const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops,
    const std::string& rank_field, const std::string& ops_field, const registry::JobEntry& job,
    const IngestLimits& limits) {
  if (job.FindRank(rank) == nullptr) {
    return util::MakeFieldError(
        rank_field, absl::StrCat("rank ", rank, " is not registered in job '", job.name(), "'"));
  }
  const registry::CommInfo* cached = nullptr;
  uint64_t last_seq = 0;
  for (int i = 0; i < ops.size(); ++i) {
    const falcon::v1::OpRecord& op = ops[i];
    if (cached == nullptr || cached->comm.comm_id() != op.comm_id()) {
      cached = job.FindComm(op.comm_id());
      if (cached == nullptr) {
        return util::MakeFieldError(At(ops_field.c_str(), i, "comm_id"),
                                    absl::StrCat("comm ", op.comm_id(), " is not registered"));
      }
      if (!cached->HasMember(rank)) {
        const uint64_t id = op.comm_id();
        cached = nullptr;
        return util::MakeFieldError(At(ops_field.c_str(), i, "comm_id"),
                                    absl::StrCat("rank ", rank, " is not a member of comm ", id));
      }
    }
    if (op.op_kind() == falcon::v1::OP_KIND_UNSPECIFIED ||
        !falcon::v1::OpKind_IsValid(op.op_kind())) {
      return util::MakeFieldError(At(ops_field.c_str(), i, "op_kind"),
                                  absl::StrCat("kind ", op.op_kind(), " is not a known op"));
    }
    if (op.bytes() > limits.max_op_bytes) {
      return util::MakeFieldError(At(ops_field.c_str(), i, "bytes"),
                                  absl::StrCat(op.bytes(), " exceeds ", limits.max_op_bytes));
    }
    if (common::HasPeer(op.op_kind())) {
      if (op.peer() < 0 || static_cast<uint32_t>(op.peer()) == rank ||
          !cached->HasMember(static_cast<uint32_t>(op.peer()))) {
        return util::MakeFieldError(
            At(ops_field.c_str(), i, "peer"),
            absl::StrCat(op.peer(), " is not another member of comm ", op.comm_id()));
      }
    } else if (op.peer() != -1) {
      return util::MakeFieldError(At(ops_field.c_str(), i, "peer"),
                                  absl::StrCat(op.peer(), " must be -1 for a collective"));
    }
    if (op.host_start_ns() < 0) {
      return util::MakeFieldError(At(ops_field.c_str(), i, "host_start_ns"),
                                  absl::StrCat(op.host_start_ns(), " is negative"));
    }
    if (op.host_end_ns() < op.host_start_ns() ||
        op.host_end_ns() - op.host_start_ns() > limits.max_duration_ns) {
      return util::MakeFieldError(
          At(ops_field.c_str(), i, "host_end_ns"),
          absl::StrCat(op.host_end_ns(), " is not in [host_start_ns=", op.host_start_ns(),
                       ", host_start_ns + ", limits.max_duration_ns, "]"));
    }
    if (op.device_duration_ns() < 0 || op.device_duration_ns() > limits.max_duration_ns) {
      return util::MakeFieldError(
          At(ops_field.c_str(), i, "device_duration_ns"),
          absl::StrCat(op.device_duration_ns(), " is outside [0, ", limits.max_duration_ns, "]"));
    }
    if (op.seq() <= last_seq) {
      return util::MakeFieldError(At(ops_field.c_str(), i, "seq"),
                                  absl::StrCat(op.seq(), " does not increase over ", last_seq));
    }
    last_seq = op.seq();
    if (op.iteration() < -1 || op.iteration() > limits.max_iteration) {
      return util::MakeFieldError(
          At(ops_field.c_str(), i, "iteration"),
          absl::StrCat(op.iteration(), " is outside [-1, ", limits.max_iteration, "]"));
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status IngestLimits::Validate() const {
  if (max_iterations_per_batch == 0 || max_iterations_per_batch > 65536) {
    return absl::InvalidArgumentError("max_iterations_per_batch: must be in [1, 65536]");
  }
  if (max_ops_per_batch == 0 || max_ops_per_batch > (1u << 20)) {
    return absl::InvalidArgumentError("max_ops_per_batch: must be in [1, 1048576]");
  }
  if (max_duration_ns <= 0) return absl::InvalidArgumentError("max_duration_ns: must be > 0");
  if (max_iteration <= 0) return absl::InvalidArgumentError("max_iteration: must be > 0");
  return absl::OkStatus();
}

util::MaybeFieldError ValidateHello(const falcon::v1::AgentHello& hello) {
  if (!common::IsValidAgentId(hello.agent_id())) {
    return util::MakeFieldError("hello.agent_id", "must be 1 to 256 bytes");
  }
  if (!common::IsValidNodeName(hello.node())) {
    return util::MakeFieldError("hello.node", "must be 1 to 256 bytes");
  }
  if (hello.version().size() > 256)
    return util::MakeFieldError("hello.version", "longer than 256 bytes");
  absl::flat_hash_set<std::string> jobs;
  for (int i = 0; i < hello.jobs_size(); ++i) {
    std::string path = util::Indexed("hello.jobs", i);
    if (util::MaybeFieldError e = registry::ValidateJobRegistration(hello.jobs(i), path)) return e;
    if (!jobs.insert(hello.jobs(i).job()).second) {
      return util::MakeFieldError(path + ".job",
                                  absl::StrCat("job '", hello.jobs(i).job(), "' listed twice"));
    }
  }
  return std::nullopt;
}

util::MaybeFieldError ValidateBatchEnvelope(const falcon::v1::TelemetryBatch& batch,
                                            const IngestLimits& limits) {
  if (batch.sequence() == 0) return util::MakeFieldError("batch.sequence", "must be >= 1");
  if (!common::IsValidJobName(batch.job())) {
    return util::MakeFieldError("batch.job", absl::StrCat("must be ", common::kJobNameRule));
  }
  if (batch.iterations_size() > static_cast<int>(limits.max_iterations_per_batch)) {
    return util::MakeFieldError(
        "batch.iterations", absl::StrCat(batch.iterations_size(), " summaries exceed the limit ",
                                         limits.max_iterations_per_batch));
  }
  if (const int64_t ops = common::OpRecordCount(batch);
      ops > static_cast<int64_t>(limits.max_ops_per_batch)) {
    // Named where the records are: both fields when both hold some.
    const bool in_ops = batch.ops_size() > 0, in_rank_ops = ops > batch.ops_size();
    return util::MakeFieldError(
        in_ops && in_rank_ops ? "batch.ops+batch.rank_ops"
        : in_rank_ops         ? "batch.rank_ops"
                              : "batch.ops",
        absl::StrCat(ops, " op records exceed the limit ", limits.max_ops_per_batch));
  }
  if (batch.has_registration()) {
    if (util::MaybeFieldError e =
            registry::ValidateJobRegistration(batch.registration(), "batch.registration")) {
      return e;
    }
    if (batch.registration().job() != batch.job()) {
      return util::MakeFieldError("batch.registration.job",
                                  absl::StrCat("'", batch.registration().job(),
                                               "' differs from batch.job '", batch.job(), "'"));
    }
  }
  return std::nullopt;
}

util::MaybeFieldError ValidateBatchData(const falcon::v1::TelemetryBatch& batch,
                                        const registry::JobEntry& job, const IngestLimits& limits) {
  absl::flat_hash_map<uint32_t, int64_t> last_iteration;
  for (int i = 0; i < batch.iterations_size(); ++i) {
    const falcon::v1::IterationSummary& s = batch.iterations(i);
    if (util::MaybeFieldError e = CheckSummary(s, i, job, limits)) return e;
    auto [it, inserted] = last_iteration.try_emplace(s.rank(), s.iteration());
    if (!inserted) {
      if (s.iteration() <= it->second) {
        return util::MakeFieldError(At("batch.iterations", i, "iteration"),
                                    absl::StrCat(s.iteration(), " does not increase over ",
                                                 it->second, " for rank ", s.rank()));
      }
      it->second = s.iteration();
    }
  }
  if (batch.ops_size() > 0) {
    if (util::MaybeFieldError e =
            CheckRankOps(batch.op_rank(), batch.ops(), "batch.op_rank", "batch.ops", job, limits)) {
      return e;
    }
  }
  absl::flat_hash_set<uint32_t> op_ranks;
  if (batch.ops_size() > 0) op_ranks.insert(batch.op_rank());
  for (int k = 0; k < batch.rank_ops_size(); ++k) {
    const falcon::v1::RankOps& ro = batch.rank_ops(k);
    const std::string base = absl::StrCat("batch.rank_ops[", k, "]");
    if (!op_ranks.insert(ro.rank()).second) {
      return util::MakeFieldError(absl::StrCat(base, ".rank"),
                                  absl::StrCat("rank ", ro.rank(), " has op records twice"));
    }
    if (util::MaybeFieldError e = CheckRankOps(ro.rank(), ro.ops(), absl::StrCat(base, ".rank"),
                                               absl::StrCat(base, ".ops"), job, limits)) {
      return e;
    }
  }
  return std::nullopt;
}

util::MaybeFieldError ValidateValidationResult(const falcon::v1::ValidationResult& r,
                                               const registry::JobEntry* job,
                                               const IngestLimits& limits) {
  if (r.task_id() == 0) return util::MakeFieldError("validation_result.task_id", "must be > 0");
  if (job == nullptr) {
    return util::MakeFieldError("validation_result.job",
                                absl::StrCat("job '", r.job(), "' is not registered"));
  }
  if (job->FindRank(r.rank()) == nullptr) {
    return util::MakeFieldError("validation_result.rank",
                                absl::StrCat("rank ", r.rank(), " is not registered"));
  }
  if (r.error().size() > 4096) {
    return util::MakeFieldError("validation_result.error", "longer than 4096 bytes");
  }
  if (r.gemm_duration_ns() < 0 || r.gemm_duration_ns() > limits.max_duration_ns) {
    return util::MakeFieldError(
        "validation_result.gemm_duration_ns",
        absl::StrCat(r.gemm_duration_ns(), " is outside [0, ", limits.max_duration_ns, "]"));
  }
  if (!std::isfinite(r.gemm_flops()) || r.gemm_flops() < 0) {
    return util::MakeFieldError("validation_result.gemm_flops", "must be finite and >= 0");
  }
  for (int i = 0; i < r.links_size(); ++i) {
    const falcon::v1::LinkTiming& l = r.links(i);
    std::string lp = util::Indexed("validation_result.links", i);
    if (job->FindRank(l.link().src_rank()) == nullptr || l.link().src_rank() != r.rank()) {
      return util::MakeFieldError(
          lp + ".link.src_rank",
          absl::StrCat(l.link().src_rank(), " is not the reporting rank ", r.rank()));
    }
    if (job->FindRank(l.link().dst_rank()) == nullptr ||
        l.link().dst_rank() == l.link().src_rank()) {
      return util::MakeFieldError(
          lp + ".link.dst_rank",
          absl::StrCat(l.link().dst_rank(), " is not a registered rank other than the sender"));
    }
    if (l.duration_ns() <= 0 || l.duration_ns() > limits.max_duration_ns) {
      return util::MakeFieldError(
          lp + ".duration_ns",
          absl::StrCat(l.duration_ns(), " is outside (0, ", limits.max_duration_ns, "]"));
    }
  }
  return std::nullopt;
}

util::MaybeFieldError ValidateDirectiveAck(const falcon::v1::DirectiveAck& ack,
                                           const registry::JobEntry* job) {
  if (ack.directive_id() == 0)
    return util::MakeFieldError("directive_ack.directive_id", "must be > 0");
  if (job == nullptr) {
    return util::MakeFieldError("directive_ack.job",
                                absl::StrCat("job '", ack.job(), "' is not registered"));
  }
  if (job->FindRank(ack.rank()) == nullptr) {
    return util::MakeFieldError("directive_ack.rank",
                                absl::StrCat("rank ", ack.rank(), " is not registered"));
  }
  if (ack.status() == falcon::v1::ACK_STATUS_UNSPECIFIED ||
      !falcon::v1::AckStatus_IsValid(ack.status())) {
    return util::MakeFieldError("directive_ack.status", absl::StrCat("status ", ack.status(),
                                                                     " is not a known ack status"));
  }
  if (ack.status() == falcon::v1::ACK_STATUS_REJECTED && ack.reason().empty()) {
    return util::MakeFieldError("directive_ack.reason", "required when REJECTED");
  }
  if (ack.status() == falcon::v1::ACK_STATUS_APPLIED && ack.applied_iteration() < 0) {
    return util::MakeFieldError("directive_ack.applied_iteration",
                                absl::StrCat(ack.applied_iteration(), " is negative for APPLIED"));
  }
  if (ack.reason().size() > 4096)
    return util::MakeFieldError("directive_ack.reason", "longer than 4096 bytes");
  return std::nullopt;
}

}  // namespace falcon::controller::ingest
