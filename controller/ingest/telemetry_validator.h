// Input validation of everything an agent sends (telemetry.proto, common.proto ranges), so that a
// malformed message is answered with a FieldError naming the field and never reaches the
// registry, the detectors or the store. Pure functions; the job view comes from the registry.
#ifndef FALCON_CONTROLLER_INGEST_TELEMETRY_VALIDATOR_H_
#define FALCON_CONTROLLER_INGEST_TELEMETRY_VALIDATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "controller/registry/job_registry.h"
#include "controller/util/field_error.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::ingest {

struct IngestLimits {
  // Per batch, as telemetry.proto documents. Not reloadable.
  uint32_t max_iterations_per_batch = 65536;
  uint32_t max_ops_per_batch = 1u << 20;
  // Communicator entries per iteration summary. Default: 4096.
  uint32_t max_comms_per_summary = 4096;
  // Longest plausible iteration or op (proto: at most an hour).
  int64_t max_duration_ns = 3'600'000'000'000;
  // Largest op payload (proto: 2^40 bytes).
  uint64_t max_op_bytes = 1ull << 40;
  // Largest iteration number accepted (a trainer doing 1000 iterations/s for 300 years).
  int64_t max_iteration = int64_t{1} << 43;

  absl::Status Validate() const;
};

// AgentHello: agent_id and node 1-256 bytes, version <= 256 bytes, each job registration valid
// ("hello.jobs[i]...") and listed once.
util::MaybeFieldError ValidateHello(const falcon::v1::AgentHello& hello);

// The parts of a batch checkable without the job: sequence >= 1, job name, sizes within limits,
// the registration (when set) valid and for the same job.
util::MaybeFieldError ValidateBatchEnvelope(const falcon::v1::TelemetryBatch& batch,
                                            const IngestLimits& limits);

// The data of a batch against its job (with the batch's registration merged in):
// summaries: rank registered; iteration in [0, max_iteration] and strictly increasing per rank
//   within the batch; start_ns >= 0; iteration_time_ns in (0, max_duration]; compute_ns in
//   [0, iteration_time_ns]; plan_version >= 0; each comm registered with the rank a member,
//   busy/wait/transfer >= 0 and within max_duration, wait and transfer <= busy.
// ops (batch.ops of op_rank, and each batch.rank_ops[k] of its rank; a rank at most once):
//   the rank registered; comm registered with the rank a member; op kind known and not
//   UNSPECIFIED; bytes <= max_op_bytes; SEND/RECV peer a member of the comm other than the rank,
//   collectives peer -1; 0 <= host_start_ns <= host_end_ns, duration <= max_duration;
//   device_duration_ns in [0, max_duration]; seq >= 1 and strictly increasing; iteration >= -1.
util::MaybeFieldError ValidateBatchData(const falcon::v1::TelemetryBatch& batch,
                                        const registry::JobEntry& job, const IngestLimits& limits);

// ValidationResult: job registered (`job` non-null), rank registered, error <= 4096 bytes,
// gemm_duration_ns >= 0 and <= max_duration, gemm_flops finite and >= 0, each link's ranks
// registered and distinct, the reporting rank the sender, duration_ns in (0, max_duration].
util::MaybeFieldError ValidateValidationResult(const falcon::v1::ValidationResult& result,
                                               const registry::JobEntry* job,
                                               const IngestLimits& limits);

// DirectiveAck: directive_id > 0, job registered, rank registered, status known and not
// UNSPECIFIED, reason non-empty when REJECTED, applied_iteration >= 0 when APPLIED.
util::MaybeFieldError ValidateDirectiveAck(const falcon::v1::DirectiveAck& ack,
                                           const registry::JobEntry* job);

}  // namespace falcon::controller::ingest

#endif  // FALCON_CONTROLLER_INGEST_TELEMETRY_VALIDATOR_H_
