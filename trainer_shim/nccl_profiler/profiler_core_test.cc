#include "trainer_shim/nccl_profiler/profiler_core.h"

#include <unistd.h>

#include <limits>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace falcon::trainer_shim::nccl_profiler {
namespace {

class CaptureSink : public RecordSink {
 public:
  bool RecordPeerTransfer(const falcon_shim_peer_transfer& t) override {
    transfers.push_back(t);
    return accept;
  }
  bool RecordOp(const falcon_shim_op& op) override {
    ops.push_back(op);
    return accept;
  }
  std::vector<falcon_shim_peer_transfer> transfers;
  std::vector<falcon_shim_op> ops;
  bool accept = true;
};

class CoreTest : public ::testing::Test {
 protected:
  ProfilerCore::Options Opts() {
    ProfilerCore::Options o;
    o.handle = 42;
    o.nranks = 4;
    o.rank = 0;
    o.pid = getpid();
    o.emit_ops = true;
    return o;
  }
  // Monotonic time is 0 at construction; At(t) moves it to t ns.
  void At(int64_t ns) { clock_.Advance(absl::Nanoseconds(ns - clock_.MonotonicNanos())); }
  EventStateArgs Size(size_t bytes) {
    EventStateArgs a{};
    a.proxyStep.transSize = bytes;
    return a;
  }
  // One send step on `proxy_op`: start, SendGpuWait and SendPeerWait at t0, SendWait at
  // `net_start`, stop at `net_end`.
  void SendStep(void* proxy_op, int64_t t0, int64_t net_start, int64_t net_end, size_t bytes) {
    At(t0);
    void* s = core_->StartProxyStep(proxy_op);
    ASSERT_NE(s, nullptr);
    EventStateArgs stale = Size(999);  // Before SendWait transSize is the previous step's.
    ProfilerCore::RecordEventState(s, kProxyStepSendGpuWait, &stale);
    ProfilerCore::RecordEventState(s, kProxyStepSendPeerWaitV4, &stale);
    At(net_start);
    EventStateArgs a = Size(bytes);
    ProfilerCore::RecordEventState(s, kProxyStepSendWait, &a);
    At(net_end);
    ProfilerCore::StopEvent(s);
  }
  // One recv step: RecvWait at `net_start`, RecvFlushWait at `net_end`, RecvGpuWait and stop later.
  void RecvStep(void* proxy_op, int64_t net_start, int64_t net_end, size_t bytes) {
    At(net_start - 1);
    void* s = core_->StartProxyStep(proxy_op);
    ASSERT_NE(s, nullptr);
    At(net_start);
    EventStateArgs zero = Size(0);
    ProfilerCore::RecordEventState(s, kProxyStepRecvWait, &zero);
    At(net_end);
    EventStateArgs a = Size(bytes);
    ProfilerCore::RecordEventState(s, kProxyStepRecvFlushWait, &a);
    At(net_end + 50);
    ProfilerCore::RecordEventState(s, kProxyStepRecvGpuWait, &a);
    At(net_end + 100);
    ProfilerCore::StopEvent(s);
  }
  // A later group with an op that starts a child: tells the core earlier groups are over.
  void NextGroupStarts(int64_t t) {
    At(t);
    void* g = core_->StartGroup();
    void* op = core_->StartColl(g, "AllReduce", 1, "ncclInt8");
    ProfilerCore::StopEvent(g);
    ProfilerCore::StopEvent(op);
    void* k = core_->StartKernelCh(op, 0, 1);
    ASSERT_NE(k, nullptr);
  }
  void Make(ProfilerCore::Options o) {
    core_ = std::make_unique<ProfilerCore>(o, clock_, &sink_, &counters_);
  }

  common::FakeClock clock_;
  CaptureSink sink_;
  CoreCounters counters_;
  std::unique_ptr<ProfilerCore> core_;
};

TEST_F(CoreTest, CollectiveIsEmittedWhenTheNextGroupRunsNotWhenEnqueued) {
  Make(Opts());
  At(1000);
  void* g = core_->StartGroup();
  void* op = core_->StartColl(g, "AllReduce", 1024, "ncclFloat32");
  ASSERT_NE(op, nullptr);
  ProfilerCore::StopEvent(g);
  At(1100);
  ProfilerCore::StopEvent(op);  // Enqueued only.
  EXPECT_TRUE(sink_.ops.empty());

  // Send to peer 1 on channels 0 and 1; recv from peer 3 on channel 0. In time order.
  At(2000);
  void* k0 = core_->StartKernelCh(op, 0, 500'000);
  void* send0 = core_->StartProxyOp(op, getpid(), 0, 1, true);
  void* send1 = core_->StartProxyOp(op, getpid(), 1, 1, true);
  void* recv0 = core_->StartProxyOp(op, getpid(), 0, 3, false);
  EventStateArgs stale = Size(999);  // Before SendWait, transSize is the previous step's.
  At(2100);
  void* sa = core_->StartProxyStep(send0);
  ProfilerCore::RecordEventState(sa, kProxyStepSendGpuWait, &stale);
  ProfilerCore::RecordEventState(sa, kProxyStepSendPeerWaitV4, &stale);
  void* ra = core_->StartProxyStep(recv0);
  At(2200);
  EventStateArgs s2048 = Size(2048), s1024 = Size(1024), s4096 = Size(4096), s0 = Size(0);
  ProfilerCore::RecordEventState(sa, kProxyStepSendWait, &s2048);
  ProfilerCore::RecordEventState(ra, kProxyStepRecvWait, &s0);
  At(2300);
  void* sb = core_->StartProxyStep(send0);
  At(2400);
  ProfilerCore::StopEvent(sa);
  ProfilerCore::RecordEventState(sb, kProxyStepSendWait, &s2048);  // Adjacent to sa.
  At(2500);
  void* sc = core_->StartProxyStep(send1);
  ProfilerCore::RecordEventState(sc, kProxyStepSendWait, &s1024);  // Overlaps sb.
  At(2600);
  ProfilerCore::StopEvent(sb);
  At(2700);
  ProfilerCore::StopEvent(sc);  // Busy so far: [2200, 2700].
  At(2900);
  ProfilerCore::RecordEventState(ra, kProxyStepRecvFlushWait, &s4096);
  At(2950);
  ProfilerCore::RecordEventState(ra, kProxyStepRecvGpuWait, &s4096);
  At(3000);
  ProfilerCore::StopEvent(ra);
  void* sd = core_->StartProxyStep(send1);
  ProfilerCore::RecordEventState(sd, kProxyStepSendWait, &s1024);  // After a gap.
  At(3100);
  ProfilerCore::StopEvent(sd);
  At(3200);
  ProfilerCore::StopEvent(send0);
  ProfilerCore::StopEvent(send1);
  ProfilerCore::StopEvent(recv0);
  EventStateArgs stop{};
  stop.kernelCh.pTimer = 503'000;
  ProfilerCore::RecordEventState(k0, kKernelChStop, &stop);
  At(3300);
  ProfilerCore::StopEvent(k0);
  EXPECT_TRUE(sink_.ops.empty()) << "its group may still have children to come";

  NextGroupStarts(4000);
  ASSERT_EQ(sink_.transfers.size(), 2u);
  const falcon_shim_peer_transfer& s = sink_.transfers[0];
  EXPECT_EQ(s.struct_size, sizeof(falcon_shim_peer_transfer));
  EXPECT_EQ(s.op_kind, FALCON_SHIM_OP_PEER_SEND);
  EXPECT_EQ(s.nccl_comm, 42u);
  EXPECT_EQ(s.peer, 1);
  EXPECT_EQ(s.channels, 2u);
  EXPECT_EQ(s.bytes, 2048u * 2 + 1024u * 2);
  EXPECT_EQ(s.start_ns, 2200);
  EXPECT_EQ(s.end_ns, 3100);
  EXPECT_EQ(s.busy_ns, 500 + 100);
  EXPECT_EQ(s.iteration, -1);
  const falcon_shim_peer_transfer& r = sink_.transfers[1];
  EXPECT_EQ(r.op_kind, FALCON_SHIM_OP_PEER_RECV);
  EXPECT_EQ(r.peer, 3);
  EXPECT_EQ(r.channels, 1u);
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.start_ns, 2200);
  EXPECT_EQ(r.end_ns, 2900);  // RecvFlushWait, not the GPU wait or the stop.
  EXPECT_EQ(r.busy_ns, 700);

  ASSERT_EQ(sink_.ops.size(), 1u);
  const falcon_shim_op& o = sink_.ops[0];
  EXPECT_EQ(o.op_kind, FALCON_SHIM_OP_ALL_REDUCE);
  EXPECT_EQ(o.bytes, 4096u);
  EXPECT_EQ(o.host_start_ns, 1000);
  EXPECT_EQ(o.host_end_ns, 3300);  // The last child's stop, not the enqueue at 1100.
  EXPECT_EQ(o.device_duration_ns, 3000);
  EXPECT_EQ(o.peer, -1);
  EXPECT_EQ(counters_.ops_emitted.load(), 1u);
  EXPECT_EQ(counters_.transfers_sent.load(), 2u);
  EXPECT_EQ(counters_.op_records_sent.load(), 1u);
  EXPECT_EQ(core_->pending_ops(), 1u);  // The next group's op.
}

TEST_F(CoreTest, OpsOfOneGroupWaitForEachOther) {
  Make(Opts());
  void* g = core_->StartGroup();
  void* a = core_->StartP2p(g, "Send", 256, "ncclFloat64", 2);
  void* b = core_->StartP2p(g, "Recv", 256, "ncclFloat64", 3);
  ProfilerCore::StopEvent(g);
  ProfilerCore::StopEvent(a);
  ProfilerCore::StopEvent(b);
  // b's proxy op runs first; a's comes later in the same group: a must still take it.
  void* pb = core_->StartProxyOp(b, getpid(), 0, 3, false);
  RecvStep(pb, 100, 200, 2048);
  ProfilerCore::StopEvent(pb);
  void* pa = core_->StartProxyOp(a, getpid(), 0, 2, true);
  ASSERT_NE(pa, nullptr);
  SendStep(pa, 300, 300, 400, 2048);
  ProfilerCore::StopEvent(pa);
  EXPECT_TRUE(sink_.transfers.empty());
  NextGroupStarts(1000);
  ASSERT_EQ(sink_.ops.size(), 2u);
  ASSERT_EQ(sink_.transfers.size(), 2u);
  EXPECT_EQ(counters_.orphan_events.load(), 0u);
  for (const falcon_shim_op& o : sink_.ops) {
    EXPECT_EQ(o.bytes, 2048u);
    EXPECT_EQ(o.peer, o.op_kind == FALCON_SHIM_OP_SEND ? 2 : 3);
  }
}

TEST_F(CoreTest, PxnProxyOpIsDroppedWithoutTouchingItsParent) {
  Make(Opts());
  void* g = core_->StartGroup();
  void* op = core_->StartColl(g, "AllGather", 8, "ncclInt32");
  // Another process's address: never dereferenced (a wild pointer here would crash if it were).
  void* foreign = reinterpret_cast<void*>(uintptr_t{0x10});
  EXPECT_EQ(core_->StartProxyOp(foreign, getpid() + 1, 0, 2, true), nullptr);
  EXPECT_EQ(counters_.pxn_proxy_ops.load(), 1u);
  // A step whose ProxyOp got no handle has no parent of ours either.
  EXPECT_EQ(core_->StartProxyStep(nullptr), nullptr);
  EXPECT_EQ(core_->StartProxyStep(foreign), nullptr);
  EXPECT_EQ(counters_.orphan_events.load(), 2u);
  ProfilerCore::StopEvent(g);
  ProfilerCore::StopEvent(op);
  core_->Flush();
  ASSERT_EQ(sink_.ops.size(), 1u);
  EXPECT_EQ(sink_.ops[0].bytes, 32u);
  EXPECT_TRUE(sink_.transfers.empty());
}

TEST_F(CoreTest, IntraNodeOpHasNoTransfers) {
  Make(Opts());
  At(10);
  void* g = core_->StartGroup();
  void* op = core_->StartColl(g, "ReduceScatter", 100, "ncclBfloat16");
  ProfilerCore::StopEvent(g);
  At(20);
  ProfilerCore::StopEvent(op);
  At(30);
  void* k = core_->StartKernelCh(op, 0, 0);  // No GPU timer: no device time.
  At(90);
  ProfilerCore::StopEvent(k);
  NextGroupStarts(100);
  ASSERT_EQ(sink_.ops.size(), 1u);
  EXPECT_TRUE(sink_.transfers.empty());
  EXPECT_EQ(sink_.ops[0].op_kind, FALCON_SHIM_OP_REDUCE_SCATTER);
  EXPECT_EQ(sink_.ops[0].bytes, 100u * 2 * 4);  // Per-rank count x nranks.
  EXPECT_EQ(sink_.ops[0].host_end_ns, 90);
  EXPECT_EQ(sink_.ops[0].device_duration_ns, 0);
}

// Ops of a communicator that never has proxy or kernel events are emitted once settled (stopped
// for settle_ns), at the next op's stop, not held until max_pending_ops.
TEST_F(CoreTest, OpsWithoutAnyChildAreEmittedOnceSettled) {
  Make(Opts());
  At(10);
  void* a = core_->StartColl(nullptr, "AllReduce", 4, "ncclFloat32");
  At(20);
  ProfilerCore::StopEvent(a);
  At(500'000'000);
  void* b = core_->StartColl(nullptr, "AllReduce", 4, "ncclFloat32");
  ProfilerCore::StopEvent(b);
  EXPECT_TRUE(sink_.ops.empty()) << "a has been stopped for less than settle_ns";
  At(1'000'000'020);
  void* c = core_->StartColl(nullptr, "AllReduce", 4, "ncclFloat32");
  ProfilerCore::StopEvent(c);
  ASSERT_EQ(sink_.ops.size(), 1u);  // a; b and c are younger.
  EXPECT_EQ(sink_.ops[0].host_start_ns, 10);
  EXPECT_EQ(sink_.ops[0].host_end_ns, 20);
  EXPECT_EQ(counters_.ops_forced.load(), 0u);
}

TEST_F(CoreTest, OpRecordsOnlyWhenAskedAndKnown) {
  ProfilerCore::Options o = Opts();
  o.emit_ops = false;
  Make(o);
  void* op = core_->StartColl(nullptr, "AllReduce", 4, "ncclFloat32");
  ProfilerCore::StopEvent(op);
  core_->Flush();
  EXPECT_TRUE(sink_.ops.empty());
  EXPECT_EQ(counters_.ops_emitted.load(), 1u);

  Make(Opts());
  op = core_->StartColl(nullptr, "Mystery", 4, "ncclFloat32");
  void* op2 = core_->StartColl(nullptr, "AllReduce", 4, "ncclMystery");
  ProfilerCore::StopEvent(op);
  ProfilerCore::StopEvent(op2);
  core_->Flush();
  EXPECT_TRUE(sink_.ops.empty());
  EXPECT_EQ(counters_.ops_unknown.load(), 2u);
}

TEST_F(CoreTest, StepWithoutNetworkPhaseIsCountedAndRefusalsAreCounted) {
  Make(Opts());
  sink_.accept = false;
  void* op = core_->StartColl(nullptr, "Broadcast", 16, "ncclUint8");
  ProfilerCore::StopEvent(op);
  void* p = core_->StartProxyOp(op, getpid(), 3, 1, true);
  void* s = core_->StartProxyStep(p);
  ProfilerCore::RecordEventState(s, kProxyStepSendGpuWait, nullptr);
  ProfilerCore::StopEvent(s);
  EXPECT_EQ(counters_.steps_without_network.load(), 1u);
  SendStep(p, 10, 20, 30, 16);
  ProfilerCore::StopEvent(p);
  core_->Flush();
  EXPECT_EQ(counters_.transfers_refused.load(), 1u);
  EXPECT_EQ(counters_.op_records_refused.load(), 1u);
  EXPECT_EQ(core_->live_events(), 0u);
}

TEST_F(CoreTest, BoundedEventsAndPendingOps) {
  ProfilerCore::Options o = Opts();
  o.max_events = 3;
  o.max_pending_ops = 2;
  Make(o);
  void* a = core_->StartColl(nullptr, "AllReduce", 1, "ncclInt8");
  void* b = core_->StartColl(nullptr, "AllReduce", 1, "ncclInt8");
  void* c = core_->StartColl(nullptr, "AllReduce", 1, "ncclInt8");
  EXPECT_EQ(core_->StartColl(nullptr, "AllReduce", 1, "ncclInt8"), nullptr);
  EXPECT_EQ(counters_.events_dropped.load(), 1u);
  ProfilerCore::StopEvent(a);
  ProfilerCore::StopEvent(b);
  ProfilerCore::StopEvent(c);  // Three stopped ops pending > 2: the oldest goes out early.
  EXPECT_EQ(counters_.ops_forced.load(), 1u);
  EXPECT_EQ(core_->pending_ops(), 2u);
  ProfilerCore::StopEvent(c);  // A second stop is ignored.
  core_->Flush();
  EXPECT_EQ(counters_.ops_emitted.load(), 3u);
  EXPECT_EQ(core_->live_events(), 0u);
}

TEST_F(CoreTest, StepOutlivingItsProxyOpKeepsTheOpOpen) {
  Make(Opts());
  void* g = core_->StartGroup();
  void* op = core_->StartColl(g, "AllReduce", 1, "ncclInt8");
  ProfilerCore::StopEvent(g);
  ProfilerCore::StopEvent(op);
  void* p = core_->StartProxyOp(op, getpid(), 0, 1, true);
  void* s = core_->StartProxyStep(p);
  At(10);
  EventStateArgs a = Size(64);
  ProfilerCore::RecordEventState(s, kProxyStepSendWait, &a);
  ProfilerCore::StopEvent(p);  // Before its step.
  NextGroupStarts(20);
  EXPECT_TRUE(sink_.transfers.empty());
  At(30);
  ProfilerCore::StopEvent(s);
  ASSERT_EQ(sink_.transfers.size(), 1u);
  EXPECT_EQ(sink_.transfers[0].busy_ns, 20);
  EXPECT_EQ(sink_.transfers[0].bytes, 64u);
}

TEST_F(CoreTest, IgnoredEventsAndCoalescedIntervals) {
  ProfilerCore::Options o = Opts();
  o.max_intervals = 2;
  Make(o);
  ProfilerCore::StopEvent(core_->Ignored());
  ProfilerCore::RecordEventState(core_->Ignored(), kProxyCtrlIdle, nullptr);
  void* op = core_->StartColl(nullptr, "AllReduce", 1, "ncclInt8");
  ProfilerCore::StopEvent(op);
  void* p = core_->StartProxyOp(op, getpid(), 0, 1, true);
  SendStep(p, 0, 0, 10, 1);
  SendStep(p, 100, 100, 110, 1);
  SendStep(p, 1000, 1000, 1010, 1);  // Third interval: the two closest merge.
  ProfilerCore::StopEvent(p);
  core_->Flush();
  ASSERT_EQ(sink_.transfers.size(), 1u);
  EXPECT_EQ(sink_.transfers[0].busy_ns, 110 + 10);
  EXPECT_EQ(counters_.intervals_coalesced.load(), 1u);
}

TEST_F(CoreTest, HandlesUsedAfterTheirStopAreIgnored) {
  Make(Opts());
  void* g = core_->StartGroup();
  void* op = core_->StartColl(g, "AllReduce", 1, "ncclInt8");
  ProfilerCore::StopEvent(g);
  ProfilerCore::StopEvent(g);  // Group freed at its first stop.
  ProfilerCore::StopEvent(op);
  void* p = core_->StartProxyOp(op, getpid(), 0, 1, true);
  void* k = core_->StartKernelCh(op, 0, 5);
  EventStateArgs timer{};
  timer.kernelCh.pTimer = 9;
  ProfilerCore::RecordEventState(k, kKernelChStop, &timer);
  ProfilerCore::StopEvent(k);
  ProfilerCore::StopEvent(k);
  ProfilerCore::RecordEventState(k, kKernelChStop, nullptr);
  SendStep(p, 0, 10, 20, 64);
  void* s = core_->StartProxyStep(p);
  ProfilerCore::RecordEventState(s, kProxyStepSendWait, nullptr);  // NULL args: no bytes.
  ProfilerCore::RecordEventState(s, 12345, nullptr);               // Unknown state.
  ProfilerCore::StopEvent(s);
  ProfilerCore::StopEvent(s);  // Step freed at its first stop.
  EventStateArgs a = Size(1 << 20);
  ProfilerCore::RecordEventState(s, kProxyStepSendWait, &a);
  ProfilerCore::StopEvent(p);
  ProfilerCore::StopEvent(p);  // Stopped with no open step: freed.
  ProfilerCore::RecordEventState(p, kProxyStepSendWait, &a);
  EXPECT_EQ(core_->StartProxyStep(p), nullptr);  // Child of a freed parent.
  NextGroupStarts(100);
  ASSERT_EQ(sink_.transfers.size(), 1u);
  EXPECT_EQ(sink_.transfers[0].bytes, 64u);
  ProfilerCore::StopEvent(op);  // Emitted and freed.
  EXPECT_EQ(core_->StartProxyOp(op, getpid(), 1, 1, true), nullptr);
  EXPECT_EQ(counters_.orphan_events.load(), 2u);
  EXPECT_EQ(counters_.ops_emitted.load(), 1u);
  EXPECT_EQ(core_->live_events(), 2u);  // NextGroupStarts' op and its open KernelCh.
}

TEST_F(CoreTest, HugeCountsSaturateInsteadOfWrapping) {
  Make(Opts());
  // 2^62 x 4 bytes wraps to 0 in 64 bits; ReduceScatter's x nranks wraps 2^61 x 2 x 4 too.
  void* a = core_->StartColl(nullptr, "AllReduce", size_t{1} << 62, "ncclFloat32");
  void* b = core_->StartColl(nullptr, "ReduceScatter", size_t{1} << 61, "ncclFloat16");
  void* c = core_->StartP2p(nullptr, "Send", (size_t{1} << 62) + 1, "ncclFloat32", 1);
  for (void* op : {a, b, c}) ProfilerCore::StopEvent(op);
  void* p = core_->StartProxyOp(c, getpid(), 0, 1, true);
  SendStep(p, 0, 10, 20, std::numeric_limits<size_t>::max());
  SendStep(p, 30, 40, 50, 2);  // The sum wraps to 1.
  ProfilerCore::StopEvent(p);
  core_->Flush();
  ASSERT_EQ(sink_.ops.size(), 3u);
  for (const falcon_shim_op& op : sink_.ops) EXPECT_EQ(op.bytes, UINT64_MAX) << op.op_kind;
  ASSERT_EQ(sink_.transfers.size(), 1u);
  EXPECT_EQ(sink_.transfers[0].bytes, UINT64_MAX);
}

TEST_F(CoreTest, ConcurrentOpsOfManyThreads) {
  Make(Opts());
  constexpr int kThreads = 8;
  constexpr int kOps = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kOps; ++i) {
        void* g = core_->StartGroup();
        void* op = core_->StartP2p(g, "Send", 16, "ncclInt8", 1 + t % 3);
        ProfilerCore::StopEvent(g);
        ProfilerCore::StopEvent(op);
        void* p = core_->StartProxyOp(op, getpid(), t, 1 + t % 3, true);
        void* k = core_->StartKernelCh(op, t, 1);
        void* s = core_->StartProxyStep(p);
        EventStateArgs a{};
        a.proxyStep.transSize = 16;
        ProfilerCore::RecordEventState(s, kProxyStepSendWait, &a);
        ProfilerCore::StopEvent(s);
        ProfilerCore::StopEvent(s);  // Stale: may already be another thread's step.
        ProfilerCore::StopEvent(p);
        ProfilerCore::StopEvent(k);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  core_->Flush();
  EXPECT_EQ(counters_.ops_emitted.load(), uint64_t{kThreads} * kOps);
  EXPECT_EQ(counters_.events_dropped.load(), 0u);
  EXPECT_EQ(core_->live_events(), 0u);
  EXPECT_EQ(core_->pending_ops(), 0u);
}

TEST(NcclNamesTest, FunctionsAndDatatypes) {
  EXPECT_EQ(OpKindOfNcclFunc("AllGather"), FALCON_SHIM_OP_ALL_GATHER);
  EXPECT_EQ(OpKindOfNcclFunc("Recv"), FALCON_SHIM_OP_RECV);
  EXPECT_EQ(OpKindOfNcclFunc(nullptr), 0);
  EXPECT_EQ(NcclDatatypeSize("ncclFloat16"), 2u);
  EXPECT_EQ(NcclDatatypeSize("ncclUint64"), 8u);
  EXPECT_EQ(NcclDatatypeSize("float"), 0u);
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl_profiler
