/* Counters of libnccl-profiler-falcon.so (all communicators of the process), for tests and
 * diagnostics, and a clock hook for test drivers: exported beside the ncclProfiler_v* structs.
 * Same rules as falcon_shim.h: struct_size first, only extended at the end. */
#ifndef FALCON_TRAINER_SHIM_NCCL_PROFILER_PLUGIN_STATS_H_
#define FALCON_TRAINER_SHIM_NCCL_PROFILER_PLUGIN_STATS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct falcon_nccl_profiler_stats {
  uint32_t struct_size;
  uint32_t op_timing_plugin; /* 1: FALCON_NCCL_OP_TIMING=plugin (the plugin sends op records). */
  uint64_t contexts_opened;  /* init calls that succeeded. */
  uint64_t contexts_finalized;
  uint64_t init_failures;   /* init refused (the communicator runs without the plugin). */
  uint64_t ops_emitted;     /* Coll/P2p ops completed and emitted. */
  uint64_t ops_forced;      /* Of which emitted before their group was known to be over. */
  uint64_t op_records_sent; /* Op records the shim accepted (FALCON_NCCL_OP_TIMING=plugin). */
  uint64_t op_records_refused;
  uint64_t ops_unknown;           /* Unknown NCCL function or datatype: no op record. */
  uint64_t transfers_sent;        /* Peer transfers the shim accepted. */
  uint64_t transfers_refused;     /* ... refused (no shim running, communicator not bound, ...). */
  uint64_t events_dropped;        /* Event starts refused at the live-event cap. */
  uint64_t pxn_proxy_ops;         /* ProxyOps posted by another process (PXN), dropped. */
  uint64_t orphan_events;         /* Events whose parent is not a live event of the plugin. */
  uint64_t steps_without_network; /* ProxySteps stopped before their network phase began. */
  uint64_t intervals_coalesced;
  uint64_t internal_errors; /* Exceptions swallowed inside plugin calls. */
} falcon_nccl_profiler_stats;

/* Replaces the plugin's clock (host CLOCK_MONOTONIC ns, falcon_shim_now_ns) with now_ns, for
 * drivers that replay NCCL events with synthetic timings; NULL restores it. Not for production. */
void falcon_nccl_profiler_set_clock(int64_t (*now_ns)(void));

/* Fills *stats (up to stats->struct_size bytes). 0 on success, -1 on a NULL or too small stats. */
int32_t falcon_nccl_profiler_get_stats(falcon_nccl_profiler_stats* stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FALCON_TRAINER_SHIM_NCCL_PROFILER_PLUGIN_STATS_H_ */
