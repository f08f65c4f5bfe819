// The per-op observer hook: every communicator op reports one OpEvent to the process's OpObserver
// (set on CommRuntime), and every communicator reports itself once through OnCommCreated.
// The trainer shim implements OpObserver to fill its telemetry ring buffer.
//
// Deliberately tiny: standard headers and types.h (with the wire enums) only, so the shim can
// implement it without pulling in Gloo, NCCL or CUDA.
//
// Hot path contract: OnOp is called synchronously on the thread that issued the op, after the op
// completed (successfully or not), with a stack-allocated event; the communicator allocates nothing
// to report it. Implementations must be fast (the op's host_end_ns is taken before the call, so
// observer time is not counted in the op), must not throw, and must not call back into the
// communicator that reports. They are called concurrently when several threads use different
// communicators, so they must be thread-safe.
#ifndef FALCON_COLLECTIVE_OBSERVER_H_
#define FALCON_COLLECTIVE_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "collective/types.h"

namespace falcon::collective {

// One completed op on one rank; mirrors falcon.v1.OpRecord.
struct OpEvent {
  uint64_t comm_id = 0;  // Communicator the op ran on; never 0.
  OpKind kind = OpKind::OP_KIND_UNSPECIFIED;
  int32_t rank = -1;   // Global rank of the reporting process.
  int32_t peer = -1;   // Peer global rank for kSend (destination) / kRecv (source); -1 otherwise.
  int32_t root = -1;   // Root global rank for kBroadcast; -1 otherwise.
  uint64_t bytes = 0;  // Payload bytes this rank contributes: the buffer for all-reduce,
                       // broadcast, send and recv; the send buffer for all-gather and
                       // reduce-scatter; 0 for barrier.
  int64_t host_start_ns = 0;       // Host monotonic time (Clock::MonotonicNanos) the op started,
                                   // after any pause hold.
  int64_t host_end_ns = 0;         // Host monotonic time it completed, >= host_start_ns.
  int64_t device_duration_ns = 0;  // GPU time from CUDA events when profiling is on; 0 otherwise.
  uint64_t seq = 0;                // Per-process op sequence number, strictly increasing from 1.
  int64_t iteration = -1;   // Iteration hint from CommRuntime::SetIteration; -1 when unknown.
  int32_t status_code = 0;  // absl::StatusCode of the op's result; 0 (kOk) on success.
};

// A communicator as every member knows it; mirrors falcon.v1.Communicator.
struct CommInfo {
  uint64_t comm_id = 0;         // Shared by all members; never 0.
  uint64_t parent_comm_id = 0;  // Communicator it was split from; 0 for the world.
  CommKind kind = CommKind::COMM_KIND_UNKNOWN;
  std::string name;                   // Optional human label, e.g. "dp0".
  std::vector<int32_t> member_ranks;  // Global ranks in communicator-rank order.
  int32_t comm_rank = 0;              // This process's rank inside the communicator.
  std::string backend;                // "gloo" or "nccl".
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // Called once per op, after it finished. See the hot path contract above.
  virtual void OnOp(const OpEvent& event) noexcept = 0;
  // Called once per communicator this process joins (world and every split), before its first op.
  virtual void OnCommCreated(const CommInfo& info) noexcept { (void)info; }
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_OBSERVER_H_
