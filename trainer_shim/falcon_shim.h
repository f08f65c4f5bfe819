/* Falcon trainer shim: stable, versioned C ABI (for PyTorch/Megatron via ctypes or C++, and for
 * the NCCL interposer's host process). One shim per process (one rank). All entry points are
 * thread-safe, never throw, never abort, and return a falcon_shim_status; on failure
 * falcon_shim_last_error() gives the reason on the calling thread.
 *
 * ABI rules: functions are only added, never changed; structs passed in carry struct_size, are
 * only extended at the end, and the library reads no further than struct_size. Times are host
 * CLOCK_MONOTONIC nanoseconds (falcon_shim_now_ns). Values mirror the protos in proto/falcon/v1/.
 *
 * Typical use:
 *   falcon_shim_options o; falcon_shim_options_init(&o); o.epoch = 0;
 *   falcon_shim_init("job", rank, world, "/run/falcon/agent.sock", &o);
 *   falcon_shim_register_comm(id, FALCON_SHIM_COMM_DP, members, n, "dp0");
 *   per iteration i: falcon_shim_poll_directives(i, on_directive, ctx);   (safe point)
 *                    per op: falcon_shim_record_op(&op);
 *                    falcon_shim_iteration(i, start_ns, end_ns, loss, plan_version);
 *   falcon_shim_shutdown();
 */
#ifndef FALCON_TRAINER_SHIM_FALCON_SHIM_H_
#define FALCON_TRAINER_SHIM_FALCON_SHIM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1: the first; 2: falcon_shim_set_shutdown_hook; 3: agreed directives; 4: the pipeline shape in
 * the options (pipeline_blocks, block_state_bytes) and layer split directives (S2L). */
#define FALCON_SHIM_ABI_VERSION 4

/* Status codes: the absl::StatusCode / gRPC numbers. */
typedef int32_t falcon_shim_status;
#define FALCON_SHIM_OK 0
#define FALCON_SHIM_INVALID_ARGUMENT 3    /* A bad argument; last_error names the field. */
#define FALCON_SHIM_RESOURCE_EXHAUSTED 8  /* Op ring full: the record was dropped (counted). */
#define FALCON_SHIM_FAILED_PRECONDITION 9 /* Not initialized, already initialized, shut down. */
#define FALCON_SHIM_INTERNAL 13           /* Unexpected failure inside the shim. */

/* falcon.v1.OpKind */
#define FALCON_SHIM_OP_ALL_REDUCE 1
#define FALCON_SHIM_OP_ALL_GATHER 2
#define FALCON_SHIM_OP_REDUCE_SCATTER 3
#define FALCON_SHIM_OP_BROADCAST 4
#define FALCON_SHIM_OP_REDUCE 5
#define FALCON_SHIM_OP_SEND 6
#define FALCON_SHIM_OP_RECV 7
#define FALCON_SHIM_OP_BARRIER 8
#define FALCON_SHIM_OP_ALL_TO_ALL 9
#define FALCON_SHIM_OP_PEER_SEND 10 /* Peer transfers (falcon_shim_record_peer_transfer) only. */
#define FALCON_SHIM_OP_PEER_RECV 11

/* falcon.v1.CommKind */
#define FALCON_SHIM_COMM_UNKNOWN 1
#define FALCON_SHIM_COMM_DP 2
#define FALCON_SHIM_COMM_PP 3
#define FALCON_SHIM_COMM_TP 4
#define FALCON_SHIM_COMM_WORLD 5

/* Optional settings; falcon_shim_options_init fills the defaults (see ShimOptions). */
typedef struct falcon_shim_options {
  uint32_t struct_size; /* sizeof(falcon_shim_options) */
  const char* node;     /* Node name; NULL = hostname. */
  uint32_t local_rank;  /* Default 0. */
  int32_t gpu;          /* CUDA device; -1 = CPU (default). */
  int32_t dp_index;     /* Layout position; -1 = unknown (default). */
  int32_t pp_index;
  int32_t tp_index;
  uint32_t dp_size; /* Layout sizes; 0 = unknown (default). */
  uint32_t pp_size;
  uint32_t tp_size;
  uint32_t global_micro_batches;      /* 0 = unknown. */
  uint64_t epoch;                     /* Starting epoch. Default 0. */
  uint32_t ring_capacity;             /* Op records in the ring. Default 65536. */
  uint32_t max_buffered_records;      /* Held for the agent. Default 262144. */
  uint32_t max_batch_records;         /* Per OpBatch. Default 4096. */
  uint32_t flush_interval_us;         /* Default 10000. */
  uint32_t reconnect_initial_ms;      /* Default 50. */
  uint32_t reconnect_max_ms;          /* Default 5000. */
  uint32_t shutdown_flush_timeout_ms; /* Default 1000. */
  int32_t profiling;                  /* Start with device-event profiling on. Default 0. */
  /* 1: the trainer agrees on job-wide directives across ranks at each boundary
   * (falcon_shim_pending_directives, falcon_shim_poll_agreed); none is rejected as late, and
   * falcon_shim_poll_directives applies only Resume, Profiling and targeted ones. Default 0.
   * Since ABI version 3. */
  int32_t agreed_directives;
  /* The model's pipeline shape for S2L (ShimHello): blocks between the embedding and the head,
   * 0 (unknown, default) or [max(pp_size, 1), 4096]; a layer split's stage counts must sum to it.
   * Since ABI version 4. */
  uint32_t pipeline_blocks;
  /* Bytes of state one block moves between stages (parameters and optimizer moments), [0, 2^50];
   * 0 unknown (default). Since ABI version 4. */
  uint64_t block_state_bytes;
} falcon_shim_options;

/* One timed op (falcon.v1.OpRecord without seq, which the shim assigns). */
typedef struct falcon_shim_op {
  uint64_t comm_id; /* Registered communicator; != 0. */
  uint64_t bytes;   /* Payload this rank sends/contributes, <= 2^40. */
  int64_t host_start_ns;
  int64_t host_end_ns;        /* >= host_start_ns. */
  int64_t device_duration_ns; /* 0 unless timed with device events. */
  int64_t iteration;          /* -1: the shim stamps the iteration of the last poll. */
  int32_t op_kind;            /* FALCON_SHIM_OP_* */
  int32_t peer;               /* Global peer rank for SEND/RECV; -1 otherwise. */
} falcon_shim_op;

/* Directive kinds handed to the trainer (falcon.v1.Directive oneof field numbers). Pause, resume
 * and profiling are handled inside the shim. */
#define FALCON_SHIM_DIRECTIVE_MICRO_BATCH_PLAN 10
#define FALCON_SHIM_DIRECTIVE_TOPOLOGY_CHANGE 11
#define FALCON_SHIM_DIRECTIVE_CHECKPOINT_RESTART 12
#define FALCON_SHIM_DIRECTIVE_LAYER_SPLIT 16 /* Since ABI version 4. */

typedef struct falcon_shim_rank_assignment {
  uint32_t rank;
  uint32_t dp_index;
  uint32_t pp_index;
  uint32_t tp_index;
} falcon_shim_rank_assignment;

/* A directive due now. Pointers are valid only during the callback. */
typedef struct falcon_shim_directive {
  uint32_t struct_size;
  int32_t kind; /* FALCON_SHIM_DIRECTIVE_* */
  uint64_t directive_id;
  uint64_t epoch;
  int64_t effective_iteration;
  int64_t plan_version;
  uint64_t reverts_directive_id;
  const char* reason;
  const uint32_t* micro_batches; /* MICRO_BATCH_PLAN, LAYER_SPLIT: per dp_index. */
  uint32_t micro_batches_len;
  const falcon_shim_rank_assignment* assignments; /* TOPOLOGY_CHANGE. */
  uint32_t assignments_len;
  const char* checkpoint_dir; /* CHECKPOINT_RESTART. */
  const uint32_t* excluded_ranks;
  uint32_t excluded_ranks_len;
  const void* serialized; /* The falcon.v1.Directive in wire format. */
  uint64_t serialized_len;
  /* LAYER_SPLIT (falcon.v1.LayerSplit, since ABI version 4): the blocks each stage of each DP
   * group's pipeline holds, DP-major: stage s of DP group d holds stage_blocks[d * pp_stages + s]
   * blocks (each >= 1; a group's counts sum to the model's blocks), for d in
   * [0, micro_batches_len) and s in [0, pp_stages); stage_blocks_len = micro_batches_len *
   * pp_stages. The shim has checked that shape (and the sums it knows). Read these only when
   * struct_size covers them. */
  const uint32_t* stage_blocks;
  uint32_t stage_blocks_len;
  uint32_t pp_stages;
} falcon_shim_directive;

/* Apply `directive`. Return 0 when applied; non-zero to reject it, after writing a NUL-terminated
 * reason of at most reason_capacity bytes into `reason`. Called on the polling thread. */
typedef int32_t (*falcon_shim_directive_fn)(void* user_data, const falcon_shim_directive* directive,
                                            char* reason, uint32_t reason_capacity);

/* Told when a pause starts (paused = 1) and ends (0), on the polling thread. */
typedef void (*falcon_shim_pause_fn)(void* user_data, int32_t paused);

typedef struct falcon_shim_link {
  uint32_t src_rank;
  uint32_t dst_rank;
} falcon_shim_link;

#define FALCON_SHIM_VALIDATION_GEMM 5
#define FALCON_SHIM_VALIDATION_LINK_PASS 6

/* A validation task (falcon.v1.ValidationTask). Pointers valid only during the callback. */
typedef struct falcon_shim_validation_task {
  uint32_t struct_size;
  int32_t kind; /* FALCON_SHIM_VALIDATION_* */
  uint64_t task_id;
  uint64_t epoch;
  uint32_t repeats;
  uint32_t gemm_m, gemm_n, gemm_k; /* GEMM */
  uint32_t pass_index;             /* LINK_PASS */
  const falcon_shim_link* links;
  uint32_t links_len;
  uint64_t link_bytes;
  uint64_t comm_id;
} falcon_shim_validation_task;

typedef struct falcon_shim_link_timing {
  falcon_shim_link link;
  int64_t duration_ns;
  uint64_t bytes;
} falcon_shim_link_timing;

/* Filled by the executor. The shim provides link_timings with room for the task's links. */
typedef struct falcon_shim_validation_result {
  int64_t gemm_duration_ns;
  double gemm_flops;
  falcon_shim_link_timing* link_timings;
  uint32_t link_timings_capacity;
  uint32_t link_timings_len; /* Set by the executor, <= capacity. */
  char* error;               /* NUL-terminated reason when the test could not run. */
  uint32_t error_capacity;
} falcon_shim_validation_result;

/* Run the task; return 0 on success, non-zero with result->error set otherwise. */
typedef int32_t (*falcon_shim_validation_fn)(void* user_data,
                                             const falcon_shim_validation_task* task,
                                             falcon_shim_validation_result* result);

typedef struct falcon_shim_stats {
  uint32_t struct_size;
  int32_t connected;
  int32_t paused;
  int32_t profiling;
  uint64_t epoch;
  uint64_t records_accepted;
  uint64_t records_dropped_ring;
  uint64_t records_evicted;
  uint64_t records_acked;
  uint64_t held_records;
  uint64_t batches_sent;
  uint64_t batches_resent;
  uint64_t connects;
  uint64_t directives_applied;
  uint64_t directives_rejected;
  uint64_t validation_tasks;
  /* Accepted by the agent, then dropped at the buffer bound before the agent delivered them:
   * lost only if that agent dies first. */
  uint64_t records_evicted_accepted;
  /* Peer transfers and NCCL-profiler ops dropped because their communicator handle was not bound
   * (falcon_shim_nccl_comm_bind) or their peer was outside it. */
  uint64_t records_unbound;
} falcon_shim_stats;

/* NCCL profiler plugin support (trainer_shim/nccl_profiler/, docs/gpu.md). NCCL's profiler
 * plugin sees a communicator only as its per-communicator context (size, own rank, comm-local
 * peer ranks); the LD_PRELOAD interposer knows its Falcon comm id and its members' global ranks
 * (one all-gather at creation). They meet here, in the shim library both processes' parts load:
 *   plugin init:        falcon_shim_nccl_comm_open(handle, nranks, rank)
 *   interposer, after the comm's members are known (and before falcon_shim_register_comm):
 *                       falcon_shim_nccl_comm_bind(nranks, rank, comm_id, members, nranks)
 *                       binds the oldest open, unbound handle with the same nranks and rank
 *                       (NCCL runs a communicator's profiler init inside its creation, so the
 *                       order of creations is the order of opens);
 *   plugin, per transfer / op: falcon_shim_record_peer_transfer / falcon_shim_record_nccl_op;
 *                       records of an unbound handle are dropped and counted (records_unbound);
 *   plugin finalize:    falcon_shim_nccl_comm_close(handle).
 * These work before falcon_shim_init (the plugin's init runs inside the first communicator's
 * creation); records still need a running shim. */

/* Network transfer to or from one peer within one NCCL op, over all of the op's channels. */
typedef struct falcon_shim_peer_transfer {
  uint32_t struct_size; /* sizeof(falcon_shim_peer_transfer) */
  int32_t op_kind;      /* FALCON_SHIM_OP_PEER_SEND (this rank sent) or FALCON_SHIM_OP_PEER_RECV. */
  uint64_t nccl_comm;   /* Handle given to falcon_shim_nccl_comm_open. */
  int32_t peer;         /* Communicator rank of the peer, [0, nranks), != own rank. */
  uint32_t channels;    /* Channels that carried it, >= 1. */
  uint64_t bytes;       /* Bytes moved, <= 2^40. */
  int64_t start_ns;     /* Host CLOCK_MONOTONIC: first network phase start. */
  int64_t end_ns;       /* Last network phase end, >= start_ns. */
  int64_t busy_ns;      /* Time with a network phase in flight, [0, end_ns - start_ns]. */
  int64_t iteration;    /* -1: the shim stamps the iteration of the last poll. */
} falcon_shim_peer_transfer;

/* handle: any non-zero id unique among open handles. INVALID_ARGUMENT on 0, nranks 0, rank >=
 * nranks, or a handle already open. */
falcon_shim_status falcon_shim_nccl_comm_open(uint64_t handle, uint32_t nranks, uint32_t rank);
/* FAILED_PRECONDITION when no open handle has this nranks and rank (no profiler plugin loaded:
 * harmless); INVALID_ARGUMENT on bad members. */
falcon_shim_status falcon_shim_nccl_comm_bind(uint32_t nranks, uint32_t rank, uint64_t comm_id,
                                              const uint32_t* member_ranks, uint32_t member_count);
falcon_shim_status falcon_shim_nccl_comm_close(uint64_t handle);
/* 1 when the handle is bound to a Falcon communicator. */
int32_t falcon_shim_nccl_comm_bound(uint64_t handle);
/* Records a peer transfer as an OpRecord of kind PEER_SEND / PEER_RECV on the bound comm, with the
 * peer's global rank. Hot path. */
falcon_shim_status falcon_shim_record_peer_transfer(const falcon_shim_peer_transfer* transfer);
/* Records an op timed by the plugin: op->comm_id is ignored (the bound comm's id is used) and
 * op->peer, for SEND/RECV, is a communicator rank (mapped to the global rank). */
falcon_shim_status falcon_shim_record_nccl_op(uint64_t handle, const falcon_shim_op* op);

uint32_t falcon_shim_abi_version(void);
/* CLOCK_MONOTONIC in nanoseconds: the clock for op and iteration times. */
int64_t falcon_shim_now_ns(void);
/* Message of this thread's last failed call ("" if none). Valid until the next call. */
const char* falcon_shim_last_error(void);

/* Fills `options` with the defaults and struct_size = sizeof(falcon_shim_options) as the LIBRARY
 * knows it: no size is passed in, so it writes that many bytes. Call it only on a struct at least
 * that large: a binary built against an older header than the library it runs with (a smaller
 * struct) calls it on a buffer with room to spare (e.g. 1 KiB), copies its own struct's part out,
 * and sets struct_size to its own sizeof. */
void falcon_shim_options_init(falcon_shim_options* options);
/* Starts this process's shim. agent_socket: unix socket path ("unix:" prefix optional); NULL or
 * "" buffers without an agent. options may be NULL. FAILED_PRECONDITION if already running.
 * options->struct_size says which fields the caller has: the fields its struct ends before take
 * their defaults, and so do the ABI-4 fields (pipeline_blocks, block_state_bytes) unless
 * struct_size covers both (an ABI-3 struct's sizeof, 104, takes in the tail padding where
 * pipeline_blocks now sits). */
falcon_shim_status falcon_shim_init(const char* job, uint32_t rank, uint32_t world_size,
                                    const char* agent_socket, const falcon_shim_options* options);
/* Hot path (~20-40 ns). RESOURCE_EXHAUSTED when the ring is full (dropped and counted). */
falcon_shim_status falcon_shim_record_op(const falcon_shim_op* op);
falcon_shim_status falcon_shim_register_comm(uint64_t comm_id, int32_t kind,
                                             const uint32_t* member_ranks, uint32_t member_count,
                                             const char* name);
falcon_shim_status falcon_shim_iteration(int64_t iteration, int64_t start_ns, int64_t end_ns,
                                         double loss, int64_t plan_version);
/* Safe point at the start of `iteration` (-1 unknown). fn may be NULL (plan directives are then
 * rejected as unsupported). May hold the caller while the job is paused. */
falcon_shim_status falcon_shim_poll_directives(int64_t iteration, falcon_shim_directive_fn fn,
                                               void* user_data);
falcon_shim_status falcon_shim_set_pause_handler(falcon_shim_pause_fn fn, void* user_data);
falcon_shim_status falcon_shim_set_validation_executor(falcon_shim_validation_fn fn,
                                                       void* user_data);
/* 1 when ops should be timed with device events now; 0 otherwise (also when not initialized). */
int32_t falcon_shim_profiling_enabled(void);
falcon_shim_status falcon_shim_get_stats(falcon_shim_stats* stats);
/* Flushes (bounded by shutdown_flush_timeout_ms) and stops. A new init may follow. */
falcon_shim_status falcon_shim_shutdown(void);

/* Agreed directives (options.agreed_directives). The job-wide directives this rank holds (no
 * target ranks; not Resume or Profiling), ascending by id: up to `capacity` ids and effective
 * iterations written, *count = how many it holds (may exceed capacity). Since ABI version 3. */
falcon_shim_status falcon_shim_pending_directives(uint64_t* ids, int64_t* effective_iterations,
                                                  uint32_t capacity, uint32_t* count);
/* The safe point at `iteration` with the ids the ranks agreed on (those every rank holds): those
 * are applied now, late or not, as falcon_shim_poll_directives applies directives; the other
 * job-wide ones wait. ids may be NULL when n is 0. Since ABI version 3. */
falcon_shim_status falcon_shim_poll_agreed(int64_t iteration, const uint64_t* ids, uint32_t n,
                                           falcon_shim_directive_fn fn, void* user_data);

/* Called first by every falcon_shim_shutdown of a running shim (not when none runs), on its
 * thread, while the shim still takes records: a library that holds records back hands them over
 * (the NCCL interposer holds an op until its CUDA events complete, and the trainer may close the
 * session it shares first). It runs under the lock of init and shutdown: it must not call
 * falcon_shim_init, falcon_shim_shutdown or falcon_shim_set_shutdown_hook. One per process, kept
 * across shim restarts; fn NULL removes it. May be set with or without a running shim. Since ABI
 * version 2. */
typedef void (*falcon_shim_shutdown_hook_fn)(void* user_data);
falcon_shim_status falcon_shim_set_shutdown_hook(falcon_shim_shutdown_hook_fn fn, void* user_data);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FALCON_TRAINER_SHIM_FALCON_SHIM_H_ */
