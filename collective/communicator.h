// The communicator interface the trainer and the shim program against. Backends: Gloo over TCP
// (host memory; gloo/gloo_communicator.h) and NCCL (device memory; nccl/nccl_communicator.h).
// world.h creates the world communicator of a rank; Split() makes DP/PP/TP sub-communicators.
//
// Semantics follow NCCL. Every op is blocking: it returns once this rank's part is complete and
// its buffers may be reused. Collectives must be called by every member in the same order; Send
// and Recv pair up in order per (sender, receiver). Ranks passed to ops are communicator ranks,
// [0, size()); info().member_ranks maps them to global ranks.
//
// Errors (absl::Status):
//   kInvalidArgument   bad buffer (null data, wrong memory kind, mismatched dtype or count),
//                      rank or root out of range, send/recv to self. The communicator stays usable.
//   kUnavailable       a peer went away (connection closed); the message names the peer's
//                      communicator and global rank.
//   kDeadlineExceeded  no progress within the communicator's timeout (a hung peer), naming the
//                      peer waited on when known.
//   kFailedPrecondition the communicator is broken by an earlier kUnavailable/kDeadlineExceeded
//                      (every later op fails fast with this code and the original message).
//   kInternal          backend failure (NCCL/CUDA error text included).
// No op throws.
//
// Thread-safety: ops on one communicator must not run concurrently (like NCCL); different
// communicators may be used from different threads. info(), id() etc. are safe at any time.
#ifndef FALCON_COLLECTIVE_COMMUNICATOR_H_
#define FALCON_COLLECTIVE_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collective/observer.h"
#include "collective/types.h"

namespace falcon::collective {

// Role and name given to a sub-communicator at Split time (reported in CommInfo).
struct CommLabel {
  CommKind kind = CommKind::COMM_KIND_UNKNOWN;
  std::string name;
};

class Communicator {
 public:
  // Split() color of a member that joins no sub-communicator.
  static constexpr int kNoColor = -1;

  virtual ~Communicator() = default;

  // Id, kind, name, members (global ranks in communicator-rank order) and this rank's position.
  virtual const CommInfo& info() const = 0;
  // Where op buffers must live: kHost (Gloo) or kDevice (NCCL).
  virtual MemoryKind memory_kind() const = 0;
  // OK, or the error that broke the communicator.
  virtual absl::Status health() const = 0;

  uint64_t id() const { return info().comm_id; }
  int rank() const { return info().comm_rank; }
  int size() const { return static_cast<int>(info().member_ranks.size()); }
  int global_rank() const { return info().member_ranks[info().comm_rank]; }

  // recv[i] = op over members of send[i]. Equal counts and dtypes; send == recv (in place) ok.
  virtual absl::Status AllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) = 0;
  // recv = concat over comm ranks of send; recv.count == size() * send.count.
  virtual absl::Status AllGather(const Buffer& send, const Buffer& recv) = 0;
  // recv = block rank() of the reduction of send; send.count == size() * recv.count.
  virtual absl::Status ReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) = 0;
  // buf of `root` is copied into buf of every member. Same count everywhere.
  virtual absl::Status Broadcast(const Buffer& buf, int root) = 0;
  // Point-to-point; the peer posts the matching Recv/Send with the same count and dtype.
  virtual absl::Status Send(const Buffer& buf, int peer) = 0;
  virtual absl::Status Recv(const Buffer& buf, int peer) = 0;
  // Returns once every member has entered the barrier.
  virtual absl::Status Barrier() = 0;

  // Collective over this communicator: members with the same color (>= 0) form a new
  // communicator, ordered by (key, rank here). Members passing kNoColor take part but get
  // nullptr. The new id is derived from (this id, color, number of earlier splits of this
  // communicator), so every member knows it without talking to the others.
  // kInvalidArgument for color < -1; backend errors as for ops.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key,
                                                              const CommLabel& label) = 0;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) {
    return Split(color, key, CommLabel{});
  }
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_COMMUNICATOR_H_
