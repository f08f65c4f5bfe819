// ProfilerCore: the events of one NCCL communicator's profiler context, turned into Falcon records.
//
// Input: the plugin's startEvent / stopEvent / recordEventState calls (profiler_abi.h), already
// decoded from the version's descriptor into the typed Start* calls below. Output, through a
// RecordSink, per Coll/P2p op (an "op" below):
//  * one peer transfer (falcon_shim_peer_transfer, docs/glossary.md "peer transfer") per (peer,
//    direction) the op moved data with over the network, aggregated over its channels: bytes
//    summed, start = earliest network-phase start, end = latest network-phase end, busy_ns = length
//    of the union of the network phases, channels = distinct channels;
//  * one op record (falcon_shim_op; only when Options::emit_ops): kind from the op's function,
//    bytes = count x datatype size (ReduceScatter: x nranks, like the interposer; UINT64_MAX when
//    it overflows, which the shim refuses), host_start_ns = the op's start event, host_end_ns = the
//    last stop among its ProxyOp / KernelCh children (no children: the op's own stop, which means
//    *enqueued*), device_duration_ns = latest KernelCh stop timer - earliest KernelCh start timer
//    (GPU globaltimer) when both were reported, else 0.
//
// Network phase of a ProxyStep (the part of a step that is the wire, not the GPU or the flush):
//  * send: from the SendWait state (the isend was posted) to the step's stop (the network reported
//    the send complete). SendGpuWait and SendPeerWait (waiting for the receiver's credit) precede
//    it and are not counted. Bytes: transSize of the SendWait state.
//  * recv: from RecvWait (the irecv was posted) to RecvFlushWait (the network reported the data
//  in);
//    without RecvFlushWait, to RecvGpuWait, else to the stop. Bytes: transSize of RecvFlushWait
//    (else of RecvGpuWait). A receive's phase includes the time the sender took to send.
// A step stopped without a network phase is counted (steps_without_network).
//
// When an op is emitted (NCCL's caveat: a Coll/P2p stop means the op was enqueued, its ProxyOp and
// KernelCh children come later, from the proxy thread): once it is stopped, none of its children
// is open, and a child of an op of a *later* Group has started (NCCL progresses a communicator's
// groups in order, so no new child of this op can follow). The ops of the last groups therefore
// wait for the next group, or Flush (finalize). Ops with no network events (intra-node) are
// emitted the same way, with no transfers; an op that has had no child at all is also emitted
// once it has been stopped for Options::settle_ns (at the next op's stop).
//
// Caveats and bounds:
//  * PXN: a ProxyOp whose pid is not this process's belongs to an op of another process; its
//    parentObj is never dereferenced; it gets no handle (so no steps) and is counted
//    (pxn_proxy_ops).
//  * Parents are looked up among this core's live events, never dereferenced blindly; a child whose
//    parent is unknown (already emitted, ignored, not ours) is counted (orphan_events) and dropped.
//  * An event's memory is recycled for a later event of the same kind, never freed while its core
//    lives: a handle used after its stop (second stop, state after stop) is ignored, or, once
//    recycled, taken for the newer event; it never reads freed memory.
//  * At most Options::max_events live events; a start beyond it gets no handle (events_dropped).
//    Stopped ops beyond Options::max_pending_ops are emitted early, oldest first (ops_forced).
//    A transfer keeps at most Options::max_intervals disjoint intervals (beyond: neighbours merge,
//    intervals_coalesced).
// Thread-safe (NCCL calls from the application thread and the proxy thread).
#ifndef FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_CORE_H_
#define FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_CORE_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/nccl_profiler/profiler_abi.h"

namespace falcon::trainer_shim::nccl_profiler {

// Where records go. Returns false when the record was refused (counted by the core).
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual bool RecordPeerTransfer(const falcon_shim_peer_transfer& transfer) = 0;
  virtual bool RecordOp(const falcon_shim_op& op) = 0;
};

// Counters, shared by the cores of a process (the plugin's) or owned by a test.
struct CoreCounters {
  std::atomic<uint64_t> ops_emitted{0};         // Ops completed and emitted (records or not).
  std::atomic<uint64_t> ops_forced{0};          // Of which emitted early (max_pending_ops).
  std::atomic<uint64_t> op_records_sent{0};     // Op records the sink accepted.
  std::atomic<uint64_t> op_records_refused{0};  // ... refused.
  std::atomic<uint64_t> ops_unknown{0};         // Unknown function or datatype: no op record.
  std::atomic<uint64_t> transfers_sent{0};      // Peer transfers the sink accepted.
  std::atomic<uint64_t> transfers_refused{0};   // ... refused (e.g. communicator not bound).
  std::atomic<uint64_t> events_dropped{0};      // Starts refused at max_events.
  std::atomic<uint64_t> pxn_proxy_ops{0};       // ProxyOps of another process, dropped.
  std::atomic<uint64_t> orphan_events{0};       // Children of an unknown parent, dropped.
  std::atomic<uint64_t> steps_without_network{0};
  std::atomic<uint64_t> intervals_coalesced{0};
  std::atomic<uint64_t> internal_errors{0};  // Exceptions swallowed at the plugin boundary.
};

class ProfilerCore {
 public:
  struct Options {
    uint64_t handle = 0;  // nccl_comm handle put into peer transfers.
    uint32_t nranks = 0;
    uint32_t rank = 0;
    pid_t pid = 0;  // This process (PXN detection).
    bool emit_ops = false;
    uint32_t max_events = 1u << 16;
    uint32_t max_pending_ops = 4096;
    // A stopped op that has had no child for this long is emitted at the next op's stop, even
    // with no later group's child to prove it complete: a communicator whose ops have no proxy or
    // kernel events (intra-node, kernel events off) would otherwise hold them until
    // max_pending_ops. A child arriving later is an orphan (counted). Default 1 s.
    int64_t settle_ns = 1'000'000'000;
    uint32_t max_intervals = 1024;
  };

  // `clock`, `sink` and `counters` outlive the core. Times: clock.MonotonicNanos().
  ProfilerCore(Options options, const common::Clock& clock, RecordSink* sink,
               CoreCounters* counters);
  ~ProfilerCore();
  ProfilerCore(const ProfilerCore&) = delete;
  ProfilerCore& operator=(const ProfilerCore&) = delete;

  // Starts return the event handle for NCCL, or null (no handle: NCCL skips the event's children).
  void* StartGroup();
  // `group`: the Group handle (v4 parentObj, v5 parentGroup), may be null or unknown.
  void* StartColl(void* group, const char* func, size_t count, const char* datatype);
  void* StartP2p(void* group, const char* func, size_t count, const char* datatype, int peer);
  void* StartProxyOp(void* parent, pid_t pid, int channel, int peer, bool is_send);
  void* StartProxyStep(void* parent);
  void* StartKernelCh(void* parent, int channel, uint64_t start_timer_ns);
  // A handle for events the core does not use (API events, ProxyCtrl, NetPlugin, CE).
  void* Ignored() { return &ignored_; }

  // Stop / state of any handle a Start* of any core returned (stopEvent carries no context), while
  // that core lives.
  static void StopEvent(void* handle);
  static void RecordEventState(void* handle, int state, const EventStateArgs* args);

  // Emits every stopped op whose children are closed (finalize).
  void Flush();

  uint64_t handle() const { return options_.handle; }
  size_t live_events() const;
  size_t pending_ops() const;

 private:
  enum class Kind : uint8_t { kIgnored, kGroup, kOp, kProxyOp, kProxyStep, kKernelCh };
  struct Transfer {
    int peer = 0;
    bool send = false;
    uint64_t bytes = 0;
    std::bitset<256> channels;
    std::vector<std::pair<int64_t, int64_t>> intervals;  // Sorted, disjoint.
  };
  struct Event {
    Event() = default;
    Event(const Event&) = default;
    // Resetting a recycled event keeps `core`: StopEvent reads it before taking the lock, possibly
    // through a stale handle.
    Event& operator=(const Event& other) {
      kind = other.kind;
      return *this;
    }
    ProfilerCore* core = nullptr;  // Set once, when first allocated.
    Kind kind = Kind::kIgnored;
  };
  struct GroupEvent : Event {
    uint64_t seq = 0;
  };
  struct OpEvent : Event {
    uint64_t group_seq = 0;
    int32_t op_kind = 0;  // FALCON_SHIM_OP_*, 0 unknown.
    uint64_t bytes = 0;
    int peer = -1;
    int64_t start_ns = 0;
    int64_t stop_ns = 0;
    int64_t last_child_end_ns = 0;
    bool stopped = false;
    bool had_children = false;
    uint32_t open_children = 0;
    uint64_t kernel_start = 0;  // Min KernelCh start timer (0: none).
    uint64_t kernel_stop = 0;   // Max KernelCh stop timer (0: none).
    std::vector<Transfer> transfers;
  };
  struct ProxyOpEvent : Event {
    OpEvent* op = nullptr;
    int channel = 0;
    int peer = 0;
    bool send = false;
    bool stopped = false;
    uint32_t open_steps = 0;
  };
  struct StepEvent : Event {
    ProxyOpEvent* proxy_op = nullptr;
    int64_t net_start = -1;
    int64_t net_end = -1;
    uint64_t bytes = 0;
  };
  struct KernelChEvent : Event {
    OpEvent* op = nullptr;
    uint64_t start_timer = 0;
    uint64_t stop_timer = 0;
  };

  template <typename T>
  T* NewEvent(Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Not live any more; kept for reuse by NewEvent.
  void FreeEvent(Event* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void DeleteEvent(Event* e);
  template <typename T>
  T* Live(void* handle, Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* StartOp(void* group, int32_t op_kind, uint64_t bytes, int peer, bool known)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Stop(Event* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void State(Event* e, int state, const EventStateArgs* args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChildStarted(OpEvent* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChildStopped(OpEvent* op, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepDone(StepEvent* s, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stopped ProxyOp whose steps are all stopped: freed, and closed as a child of its op (so an
  // op is never emitted while a step still points at it).
  void ReleaseProxyOp(ProxyOpEvent* p, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Done(const OpEvent* op) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return op->stopped && op->open_children == 0;
  }
  // Emits the done ops of groups older than the newest group with a child; then, above
  // max_pending_ops, the oldest done ops.
  void EmitReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Emits, in order, every pending op `ready` accepts.
  template <typename Ready>
  void EmitIf(Ready ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(OpEvent* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddInterval(Transfer* t, int64_t start, int64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const common::Clock& clock_;
  RecordSink* const sink_;
  CoreCounters* const counters_;
  Event ignored_;

  mutable absl::Mutex mu_;
  absl::flat_hash_set<Event*> live_ ABSL_GUARDED_BY(mu_);
  std::array<std::vector<Event*>, 6> free_ ABSL_GUARDED_BY(mu_);  // Freed events, by Kind.
  std::deque<OpEvent*> pending_ ABSL_GUARDED_BY(mu_);  // Ops not emitted, in start order.
  uint64_t next_group_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t newest_child_group_ ABSL_GUARDED_BY(mu_) = 0;  // Newest group with a child started.
};

// FALCON_SHIM_OP_* of an NCCL function name ("AllReduce", "Send", ...); 0 when unknown.
int32_t OpKindOfNcclFunc(const char* func);
// Bytes per element of an NCCL datatype name ("ncclFloat32", ...); 0 when unknown.
size_t NcclDatatypeSize(const char* datatype);

}  // namespace falcon::trainer_shim::nccl_profiler

#endif  // FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_CORE_H_
