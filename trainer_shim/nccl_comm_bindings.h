// Where NCCL's profiler plugin (trainer_shim/nccl_profiler/) and the NCCL interposer
// (trainer_shim/nccl/) meet: the plugin knows a communicator only by its profiler context (size,
// own rank, comm-local peer ranks); the interposer knows its Falcon comm id and the members'
// global ranks. The plugin Opens a handle per communicator in its init; the interposer Binds the
// oldest open, unbound handle with the same size and rank once it knows the members (NCCL runs a
// communicator's profiler init inside that communicator's creation, so creations and opens come
// in the same order); the plugin then maps its records through Lookup. The C ABI is in
// falcon_shim.h (falcon_shim_nccl_comm_*). Thread-safe.
#ifndef FALCON_TRAINER_SHIM_NCCL_COMM_BINDINGS_H_
#define FALCON_TRAINER_SHIM_NCCL_COMM_BINDINGS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace falcon::trainer_shim {

class NcclCommBindings {
 public:
  // kInvalidArgument: handle 0, nranks 0, rank >= nranks, or the handle already open.
  absl::Status Open(uint64_t handle, uint32_t nranks, uint32_t rank);
  // Binds the oldest open, unbound handle with this nranks and rank to `comm_id`.
  // kInvalidArgument: comm_id 0, members.size() != nranks, members[rank] duplicated;
  // kFailedPrecondition: no such handle (no profiler plugin in the process).
  absl::Status Bind(uint32_t nranks, uint32_t rank, uint64_t comm_id,
                    std::vector<uint32_t> member_ranks);
  // kNotFound when the handle is not open.
  absl::Status Close(uint64_t handle);

  // The handle's comm id; std::nullopt when unknown or not bound yet.
  std::optional<uint64_t> CommId(uint64_t handle) const;
  // The handle's comm id and, for comm_rank >= 0, that rank's global rank (-1 for comm_rank -1),
  // without copying the members (the records' hot path). kFailedPrecondition naming `field`
  // ("<field>.nccl_comm" unbound, "<field>.peer" outside the communicator).
  struct Resolved {
    uint64_t comm_id = 0;
    int32_t global_rank = -1;
  };
  absl::StatusOr<Resolved> Resolve(uint64_t handle, int64_t comm_rank,
                                   absl::string_view field) const;

  // Records dropped by the caller because Lookup failed (the C ABI counts them here).
  void CountUnbound() { unbound_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t unbound() const { return unbound_.load(std::memory_order_relaxed); }
  size_t open_handles() const;

 private:
  struct Entry {
    uint32_t nranks = 0;
    uint32_t rank = 0;
    bool bound = false;
    uint64_t comm_id = 0;                // Falcon communicator id, once bound.
    std::vector<uint32_t> member_ranks;  // Global rank of each communicator rank, once bound.
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> unbound_order_ ABSL_GUARDED_BY(mu_);  // Open, unbound handles, oldest first.
  std::atomic<uint64_t> unbound_{0};
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_NCCL_COMM_BINDINGS_H_
