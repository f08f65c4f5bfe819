// The logic behind libfalcon_nccl.so's NCCL wrappers (nccl_wrappers.cc).
//
// What it does around each wrapped call, on the caller's thread:
//  * ops (AllReduce ... Recv): outside a group, first a safe point (falcon_shim_poll_directives
//    with iteration -1, which may hold the caller while the job is paused); then host timestamps
//    around the real call, CUDA events on the op's stream when profiling, and an op record to the
//    shim through the C ABI (falcon_shim.h). Ops inside ncclGroupStart/End are recorded at the
//    outermost ncclGroupEnd with host_end_ns = the time the group was launched.
//  * communicator creation (InitRank, InitRankConfig, Split): a comm id every member derives alike
//    (hash of the ncclUniqueId; parent id, split index and color for splits), then the members'
//    global ranks through one all-gather of int32 over the new comm (deferred to the outermost
//    ncclGroupEnd when created inside a group; skipped for non-blocking comms), then the binding of
//    NCCL's profiler plugin's handle for it (falcon_shim_nccl_comm_bind; without the plugin loaded
//    this is a no-op), then registration. With FALCON_NCCL_OP_TIMING=plugin the ops of a comm the
//    plugin is bound to are recorded by the plugin, not here.
//  * the shim itself is started at the first op or group (not at communicator creation, so that a
//    trainer that starts its own session after NCCL's first communicator, as falcon.init after
//    PyTorch's eager init_process_group(device_id=...), keeps its layout: the interposer then
//    uses that session), with FALCON_* settings (interposer_config.h), and flushed at exit. The
//    communicators made before it are registered when it starts. When the trainer closes its
//    session, the ops still waiting for their device time are handed over first
//    (falcon_shim_set_shutdown_hook), and NCCL then passes through untimed.
//
// Failure policy: the wrapped call always happens exactly as asked, with the caller's arguments,
// and its result is returned unchanged. Anything the interposer cannot do (no agent, no CUDA
// symbols, event pool exhausted, exchange failed) only loses telemetry. Thread-safe.
#ifndef FALCON_TRAINER_SHIM_NCCL_INTERPOSER_H_
#define FALCON_TRAINER_SHIM_NCCL_INTERPOSER_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/nccl/comm_registry.h"
#include "trainer_shim/nccl/cuda_api.h"
#include "trainer_shim/nccl/interposer_config.h"

namespace falcon::trainer_shim::nccl {

class Interposer {
 public:
  // An op between BeginOp and EndOp.
  struct OpToken {
    bool active = false;  // False: nothing to record (unknown comm, or interposer off).
    bool grouped = false;
    falcon_shim_op op{};
    int event_slot = -1;  // Device timing events, or -1.
    cudaEvent_t end_event = nullptr;
    cudaStream_t stream = nullptr;
  };

  // The process's interposer, or null when disabled (FALCON_AGENT_SOCKET unset,
  // FALCON_NCCL_DISABLE=1) or when its setup failed: then wrappers pass straight through.
  static Interposer* Get();

  explicit Interposer(InterposerConfig config);

  // Ops. `peer` is the communicator rank for Send/Recv, -1 otherwise.
  // `scale_by_comm_size`: bytes is per member (ReduceScatter's recvcount) and is multiplied by
  // the communicator size.
  OpToken BeginOp(int32_t op_kind, ncclComm_t comm, cudaStream_t stream, uint64_t bytes, int peer,
                  bool scale_by_comm_size = false);
  void EndOp(OpToken& token, ncclResult_t result);

  // Groups (per thread, like NCCL's).
  void BeforeGroupStart();
  void AfterGroupStart(ncclResult_t result);
  void AfterGroupEnd(ncclResult_t result);

  // Communicators. `blocking`: false for ncclConfig_t.blocking == 0 (init may still be running).
  void AfterCommInit(ncclResult_t result, ncclComm_t comm, int nranks, const ncclUniqueId& id,
                     int rank, bool blocking);
  // Call before the real ncclCommSplit (every parent member calls it, even with NOCOLOR).
  uint64_t BeforeCommSplit(ncclComm_t parent);
  void AfterCommSplit(ncclResult_t result, ncclComm_t parent, uint64_t split_index, int color,
                      ncclComm_t newcomm, bool blocking);
  void BeforeCommDestroy(ncclComm_t comm);

  // Pushes every finished device-timed record to the shim; with `block`, waits for all of them.
  void DrainTimed(bool block);
  // At exit: FlushTimed, then shut the shim down if the interposer started it.
  void Finish();

 private:
  struct TimedOp {
    falcon_shim_op op;
    int slot;  // -1: host timing only.
  };
  struct EventPair {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };
  struct NewComm {
    ncclComm_t comm;
    uint64_t comm_id;
    int comm_rank;
    int comm_size;
  };

  // Per-thread group state (NCCL groups are per thread).
  struct ThreadState {
    int depth = 0;
    std::vector<OpToken> pending;   // Ops issued inside the current group.
    std::vector<NewComm> deferred;  // Comms created inside it; exchanged at its end.
  };
  static ThreadState& Tls();

  // A communicator's registration waiting for the shim to start.
  struct Registration {
    uint64_t comm_id;
    int32_t kind;
    std::vector<uint32_t> members;
  };
  // Sets the global rank and world size once: from the environment, else from the first
  // communicator (normally the world).
  void KnowRanks(int comm_rank, int comm_size);
  // Starts the shim, or adopts the trainer's running one, and registers the communicators
  // waiting for it. False: no communicator yet, or its start failed (then a pass-through).
  bool EnsureShim();
  void RegisterWithShim(const Registration& r);
  // Hands every held record to the shim: those whose device events completed with their device
  // time, the rest with host timing only.
  void FlushTimed();
  // falcon_shim_set_shutdown_hook's hook: FlushTimed before the shim (ours or the trainer's)
  // stops; then the session is closed for good (a warning when the trainer closed it).
  static void OnShimShutdown(void* interposer);
  std::vector<uint32_t> FallbackMembers(const NewComm& c) const;
  void SafePoint();
  void Record(const falcon_shim_op& op, int slot);
  // A free event pair on the current device (its start and end events), or -1.
  int AcquireEvents(cudaEvent_t* start, cudaEvent_t* end);
  void ReleaseEvents(int slot);
  void AddComm(const NewComm& c, bool blocking);
  // Learns members of `comms` with one grouped all-gather, then registers them with the shim.
  void ExchangeAndRegister(const std::vector<NewComm>& comms);
  void Register(const NewComm& c, const std::vector<uint32_t>& members);
  // Binds NCCL's profiler plugin's handle for `c` (libnccl-profiler-falcon.so, when loaded) to the
  // Falcon comm, so its peer transfers map to global ranks; with FALCON_NCCL_OP_TIMING=plugin the
  // comm's op records are then left to the plugin.
  void BindProfilerPlugin(const NewComm& c, const std::vector<uint32_t>& members);
  static bool BlockingByEnv();

  const InterposerConfig config_;
  const CudaApi& cuda_;
  const int owner_pid_;  // Exit handlers in forked children do nothing.
  CommRegistry comms_;

  absl::Mutex shim_mu_;
  bool shim_started_ ABSL_GUARDED_BY(shim_mu_) = false;  // By us (we flush it at exit).
  bool shim_failed_ ABSL_GUARDED_BY(shim_mu_) = false;   // Init failed: stay a pass-through.
  std::vector<Registration> unregistered_ ABSL_GUARDED_BY(shim_mu_);
  std::atomic<bool> shim_ready_{false};     // Usable (ours or the trainer's).
  std::atomic<bool> shim_given_up_{false};  // shim_failed_, read without the lock.
  // The session ended (the trainer closed it, or Finish): pass through untimed from then on.
  std::atomic<bool> session_closed_{false};
  std::atomic<bool> finishing_{false};  // Finish is shutting the shim down (no warning then).
  std::atomic<int64_t> global_rank_{-1};
  std::atomic<int64_t> world_size_{-1};

  absl::Mutex timing_mu_;
  std::vector<EventPair> events_ ABSL_GUARDED_BY(timing_mu_);
  std::vector<int> free_events_ ABSL_GUARDED_BY(timing_mu_);
  int events_device_ ABSL_GUARDED_BY(timing_mu_) = -1;
  bool events_failed_ ABSL_GUARDED_BY(timing_mu_) = false;
  std::deque<TimedOp> timed_ ABSL_GUARDED_BY(timing_mu_);
  std::atomic<size_t> timed_count_{0};
};

}  // namespace falcon::trainer_shim::nccl

#endif  // FALCON_TRAINER_SHIM_NCCL_INTERPOSER_H_
