// Shared front half of every backend: argument checks, the pause gate, per-op timing and the
// observer report, sequence numbers, broken-state tracking and Split planning. A backend derives
// from CommunicatorBase and implements the Do* hooks, which see only validated arguments and
// return transport errors (built with the PeerError helpers so they name the peer).
//
// Hot path per op: one atomic load (pause gate), two Clock::MonotonicNanos calls, one atomic
// increment (seq), a stack OpEvent and one virtual OnOp call when an observer is set. No heap.
//
// Thread-safety as Communicator: one op at a time per communicator; health() from any thread.
#ifndef FALCON_COLLECTIVE_COMMUNICATOR_BASE_H_
#define FALCON_COLLECTIVE_COMMUNICATOR_BASE_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "collective/comm_id.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"

namespace falcon::collective {

class CommunicatorBase : public Communicator {
 public:
  const CommInfo& info() const final { return info_; }
  MemoryKind memory_kind() const final { return memory_; }
  absl::Status health() const final ABSL_LOCKS_EXCLUDED(health_mu_);

  absl::Status AllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) final;
  absl::Status AllGather(const Buffer& send, const Buffer& recv) final;
  absl::Status ReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) final;
  absl::Status Broadcast(const Buffer& buf, int root) final;
  absl::Status Send(const Buffer& buf, int peer) final;
  absl::Status Recv(const Buffer& buf, int peer) final;
  absl::Status Barrier() final;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key,
                                                      const CommLabel& label) final;
  using Communicator::Split;

  CommRuntime& runtime() const { return *runtime_; }
  const std::shared_ptr<CommRuntime>& shared_runtime() const { return runtime_; }

  // Reports this communicator to the observer (OnCommCreated). Backend factories call it once
  // the world communicator is connected; Split() calls it for the communicators it returns.
  void AnnounceCreated() const;

 protected:
  // `info` must be complete (id, members, comm_rank, backend). `runtime` must not be null.
  CommunicatorBase(CommInfo info, MemoryKind memory, std::shared_ptr<CommRuntime> runtime);

  virtual absl::Status DoAllReduce(const Buffer& send, const Buffer& recv, ReduceOp op) = 0;
  virtual absl::Status DoAllGather(const Buffer& send, const Buffer& recv) = 0;
  virtual absl::Status DoReduceScatter(const Buffer& send, const Buffer& recv, ReduceOp op) = 0;
  virtual absl::Status DoBroadcast(const Buffer& buf, int root) = 0;
  virtual absl::Status DoSend(const Buffer& buf, int peer) = 0;
  virtual absl::Status DoRecv(const Buffer& buf, int peer) = 0;
  virtual absl::Status DoBarrier() = 0;
  // Gathers every member's (color, key), indexed by comm rank. Not reported to the observer.
  virtual absl::StatusOr<std::vector<std::pair<int, int>>> DoExchangeColorKey(int color,
                                                                              int key) = 0;
  // Creates the sub-communicator described by `new_info` (nullopt group: this member joins none;
  // return nullptr, after taking part in any backend-level collective the split needs).
  virtual absl::StatusOr<std::unique_ptr<CommunicatorBase>> DoSplit(
      int color, int key, const std::optional<SplitGroup>& group, CommInfo new_info) = 0;

  // During a Do* call: whether the op is profiled (device timing wanted), and where the backend
  // stores the device duration it measured.
  bool op_profiling() const { return op_profiling_; }
  void set_op_device_ns(int64_t ns) { op_device_ns_ = ns; }

  // "comm 0x1234abcd (dp0) rank 1 (global 5)": prefix for error messages.
  std::string Where() const;
  // An error with `code` about comm rank `peer`: "<Where>: peer rank 2 (global 6): <detail>".
  // peer < 0 omits the peer.
  absl::Status PeerError(absl::StatusCode code, int peer, absl::string_view detail) const;

 private:
  template <typename Body>
  absl::Status Run(OpKind kind, uint64_t bytes, int peer_global, int root_global, Body&& body);
  absl::Status CheckBuffer(absl::string_view what, const Buffer& buf) const;
  absl::Status CheckRank(absl::string_view what, int r) const;
  void MarkBroken(const absl::Status& cause) ABSL_LOCKS_EXCLUDED(health_mu_);

  const CommInfo info_;
  const MemoryKind memory_;
  const std::shared_ptr<CommRuntime> runtime_;
  uint64_t split_count_ = 0;
  bool op_profiling_ = false;
  int64_t op_device_ns_ = 0;
  std::atomic<bool> broken_{false};
  mutable absl::Mutex health_mu_;
  absl::Status health_ ABSL_GUARDED_BY(health_mu_);
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_COMMUNICATOR_BASE_H_
