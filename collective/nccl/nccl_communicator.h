// The NCCL backend: communicators on CUDA device memory (ncclCommInitRankConfig for the world,
// ncclCommSplit for sub-communicators), one CUDA stream per communicator, non-blocking NCCL
// communicators so a dead or hung peer turns into an error (the wait polls
// ncclCommGetAsyncError and aborts the communicator at the timeout) instead of a hang. The
// unique id travels through the RendezvousStore. With CommRuntime profiling on, CUDA events
// around each op give OpEvent.device_duration_ns.
//
// Link faults: NCCL's wire cannot be intercepted here (that would take a net plugin), so the
// send side of a slow link is emulated on the host before the op is enqueued: p2p sends to the
// slow peer wait the link's cost; collectives wait the cost of the ring steps this rank sends to
// its ring successor (2(n-1) chunks for all-reduce, n-1 for all-gather/reduce-scatter, one
// pipelined message for broadcast).
//
// Built only in the CUDA variant (if_cuda); needs a GPU at run time (kFailedPrecondition
// otherwise). Errors and thread-safety as Communicator.
#ifndef FALCON_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_
#define FALCON_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"

namespace falcon::collective::nccl {

struct NcclWorldOptions {
  int rank = -1;                               // Global rank, [0, world_size).
  int world_size = 0;                          // > 0; at most one rank per GPU (NCCL rule).
  std::string rendezvous_dir;                  // Shared store directory (FALCON_RENDEZVOUS).
  int local_rank = 0;                          // Rank on this node; picks the GPU when device < 0.
  int device = -1;                             // CUDA device; -1: local_rank % device count.
  absl::Duration timeout = absl::Seconds(60);  // Init and per-op progress timeout.
  uint64_t world_comm_id = 0;                  // 0: WorldCommId(world_size).
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclWorld(const NcclWorldOptions& options,
                                                              std::shared_ptr<CommRuntime> runtime);

// NCCL's version code (e.g. 22809 for 2.28.9); works without a GPU.
int NcclVersionCode();

}  // namespace falcon::collective::nccl

#endif  // FALCON_COLLECTIVE_NCCL_NCCL_COMMUNICATOR_H_
