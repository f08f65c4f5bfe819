// Communicators the NCCL interposer has seen: their Falcon comm ids (shared by all members, so
// every rank derives the same id without talking), their size, this rank's position, and the
// global ranks of the members once learned. Plain C++ over opaque comm handles (no NCCL types),
// so it is tested without NCCL. Thread-safe; Lookup is a shared lock plus a per-thread cache.
#ifndef FALCON_TRAINER_SHIM_NCCL_COMM_REGISTRY_H_
#define FALCON_TRAINER_SHIM_NCCL_COMM_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace falcon::trainer_shim::nccl {

// FNV-1a 64 over the bytes of an ncclUniqueId; never 0.
uint64_t CommIdFromUniqueId(const void* bytes, size_t size);
// Id of the communicator made by the `split_index`-th ncclCommSplit of `parent_id` with `color`.
// Every member of the parent calls ncclCommSplit the same number of times in the same order (it is
// collective), so all members of the child derive the same id. Never 0.
uint64_t SplitCommId(uint64_t parent_id, uint64_t split_index, int color);

// Checks the global ranks gathered over a communicator (index = communicator rank): the entry at
// `comm_rank` must be `my_global_rank`, all must be distinct and < world_size.
// kInvalidArgument naming the bad entry.
absl::StatusOr<std::vector<uint32_t>> CheckGatheredMembers(const std::vector<int32_t>& gathered,
                                                           int comm_rank, uint32_t my_global_rank,
                                                           uint32_t world_size);

class CommRegistry {
 public:
  struct Entry {
    uint64_t comm_id = 0;
    int comm_rank = 0;
    int comm_size = 0;
    std::vector<uint32_t> members;  // Global ranks by communicator rank; empty when unknown.
    // NCCL's profiler plugin sends this comm's op records (FALCON_NCCL_OP_TIMING=plugin and the
    // plugin's handle is bound to it): the interposer records none.
    bool ops_by_plugin = false;
  };

  // Adds or replaces the entry for `comm`.
  void Add(const void* comm, Entry entry);
  // Sets the members of a known comm. False if `comm` is unknown.
  bool SetMembers(const void* comm, std::vector<uint32_t> members);
  // Marks a known comm's op records as the plugin's. False if `comm` is unknown.
  bool SetOpsByPlugin(const void* comm);
  // Copies the id, position and size of `comm` (and, when asked, ops_by_plugin) into `out`; false
  // if unknown. Never allocates.
  bool Lookup(const void* comm, uint64_t* comm_id, int* comm_rank, int* comm_size,
              bool* ops_by_plugin = nullptr) const;
  // Global rank of communicator rank `peer` of `comm`; -1 when unknown.
  int32_t GlobalPeer(const void* comm, int peer) const;
  // Forgets `comm` (after ncclCommDestroy).
  void Remove(const void* comm);
  // The next split index of `parent` (0, 1, 2, ...).
  uint64_t NextSplitIndex(const void* parent);
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  // Entries are never freed while the process runs (a racing Lookup may hold one), only unlinked.
  absl::flat_hash_map<const void*, Entry*> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Entry>> storage_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const void*, uint64_t> split_counts_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{1};  // Bumped on every change; invalidates thread caches.
};

}  // namespace falcon::trainer_shim::nccl

#endif  // FALCON_TRAINER_SHIM_NCCL_COMM_REGISTRY_H_
