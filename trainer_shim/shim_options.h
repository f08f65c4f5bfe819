// Settings of one rank's shim (Shim::Create). Read once at creation; none can change at run time.
#ifndef FALCON_TRAINER_SHIM_SHIM_OPTIONS_H_
#define FALCON_TRAINER_SHIM_SHIM_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/backoff.h"

namespace falcon::trainer_shim {

struct ShimOptions {
  // --- Identity (ShimHello). ---
  std::string job;          // REQUIRES: a valid job name (common/names.h).
  uint32_t rank = 0;        // Global rank. REQUIRES: rank < world_size.
  uint32_t world_size = 1;  // REQUIRES: [1, 1048576].
  std::string node;         // Node name. Default: gethostname().
  uint32_t local_rank = 0;  // Rank index inside the node.
  int32_t gpu = -1;         // CUDA device index; -1 on CPU.
  int32_t pid = 0;          // Process id. Default (0): getpid().
  int32_t dp_index = -1;    // Layout position when known; -1 otherwise.
  int32_t pp_index = -1;
  int32_t tp_index = -1;
  uint32_t dp_size = 0;  // Layout sizes when known; 0 otherwise.
  uint32_t pp_size = 0;
  uint32_t tp_size = 0;
  uint32_t global_micro_batches = 0;  // 0 when unknown.
  uint64_t epoch = 0;  // Epoch the trainer starts at; directives older than it are rejected.
  // The model's pipeline shape for S2L (ShimHello.pipeline_blocks, block_state_bytes): blocks
  // between the embedding and the head, 0 (unknown) or [max(pp_size, 1), 4096]; and the bytes of
  // state one block moves between stages (parameters and optimizer moments), [0, 2^50]
  // (common::kMaxBlockStateBytes), 0 when unknown (common::ValidatePipelineShape). A layer
  // split's stage counts must sum to pipeline_blocks when it is known.
  uint32_t pipeline_blocks = 0;
  uint64_t block_state_bytes = 0;

  // --- Agent connection. ---
  // The agent's unix socket: a path ("/run/falcon/agent.sock") or a gRPC target ("unix:/path").
  // Empty: no agent; records are buffered (and the oldest dropped) up to the bounds below.
  std::string agent_socket;
  absl::Duration connect_timeout = absl::Seconds(1);  // Per connection attempt. Default 1 s.
  absl::Duration welcome_timeout = absl::Seconds(2);  // Hello -> ShimWelcome. Default 2 s.
  // Between failed attempts. Default 50 ms, doubling up to 5 s, jitter 0.2.
  common::Backoff::Options reconnect_backoff{absl::Milliseconds(50), absl::Seconds(5)};
  // How long Shutdown waits for the agent to ack what is buffered (when connected). Default 1 s.
  absl::Duration shutdown_flush_timeout = absl::Seconds(1);

  // --- Memory bounds. Memory is about (ring_capacity + max_buffered_records) * 64 bytes. ---
  // Op records between the trainer thread and the link thread; rounded up to a power of two.
  // A push into a full ring is dropped and counted. Default 65536 (4 MiB).
  uint32_t ring_capacity = 65536;
  // Op records held for the agent (unsent plus sent-but-unacked). Beyond it the oldest batches are
  // dropped and counted, so the newest records are kept. Default 262144 (16 MiB).
  uint32_t max_buffered_records = 262144;
  // Records per OpBatch. REQUIRES: [1, 65536] and <= max_buffered_records. Default 4096.
  uint32_t max_batch_records = 4096;
  // Iteration hints and directive acks / validation results queued while the agent is away; the
  // oldest iteration hints are dropped beyond it (acks and results are never dropped). Default
  // 4096.
  uint32_t max_pending_hints = 4096;
  // The link thread drains the ring and sends a batch at least this often. Default 10 ms.
  absl::Duration flush_interval = absl::Milliseconds(10);

  // --- Behaviour. ---
  // The trainer applies directives itself (it agrees on them across ranks at its iteration
  // boundaries, e.g. trainer/'s RankTrainer through trainer/directives/shim_hooks.h): the shim only
  // screens directives (TakeDirectives), forwards the trainer's acks (AckDirective) and queues
  // validation tasks (TakeValidationTasks); PollDirectives is not used. Profiling directives are
  // still applied by the shim. Default false (the shim applies directives in PollDirectives).
  bool trainer_applies_directives = false;
  // The trainer agrees with the other ranks at each boundary on the job-wide directives to apply
  // there (PendingAgreed, then PollDirectives with the agreed set; directive_intake.h's agreed
  // mode): none is rejected as late, and a PollDirectives without a set (the NCCL interposer's
  // safe points) applies only Resume, Profiling and targeted directives. Default false.
  bool agreed_directives = false;
  bool profiling = false;  // Start with device-event profiling on (the agent may change it).
  // Warnings and state changes (connected, disconnected, rejected directive). Called from any shim
  // thread; must be thread-safe and must not call back into the shim. Default: stderr.
  std::function<void(std::string_view)> log;

  // kInvalidArgument naming the first bad field.
  absl::Status Validate() const;
  // "unix:/path" for agent_socket (either spelling); empty when agent_socket is empty.
  std::string AgentTarget() const;
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_SHIM_OPTIONS_H_
