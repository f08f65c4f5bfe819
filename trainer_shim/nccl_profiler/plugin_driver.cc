// plugin_driver AGENT_SOCKET: plays one rank of an NCCL job against libnccl-profiler-falcon.so, the
// way NCCL and the interposer would, with synthetic timings (run by plugin_driver_test).
//
// Loading: like NCCL, dlopen("libnccl-profiler-${NCCL_PROFILER_PLUGIN}.so") (a value with a '/'
// is taken as the path), then dlsym of ncclProfiler_v5 and ncclProfiler_v4 (v6 only checked).
// The rank is global rank 2 of 8, with three communicators:
//   A  v5, nranks 4, rank 1, members {0, 2, 4, 6}: two groups of one AllReduce (1 Mi floats), each
//      on channels 0 and 1 sending to comm rank 2 (fast: 10 us per step) and receiving from comm
//      rank 0 (slow: 200 us per step), kS steps of kChunk bytes per channel and direction, plus
//      KernelCh events with GPU timers; one PXN ProxyOp (pid of another process).
//   B  v4, nranks 2, rank 0, members {2, 3}: an intra-node AllGather (KernelCh events only).
//   C  v5, nranks 4, rank 3: never bound; its one Send's transfer is refused by the shim.
// Order, as in a real process: plugin init inside comm creation; the shim starts at the first
// comm; falcon_shim_nccl_comm_bind then falcon_shim_register_comm per comm; events; finalize;
// shutdown. Prints "plugin.<counter> N" and "shim.<counter> N" lines; exits 1 (with the reason on
// stderr) when a call NCCL would make fails.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/nccl_profiler/plugin_stats.h"
#include "trainer_shim/nccl_profiler/profiler_abi.h"

namespace falcon::trainer_shim::nccl_profiler {
namespace {

constexpr int kSteps = 4;
constexpr size_t kChunk = 1 << 20;
constexpr int64_t kUs = 1000;

int64_t g_now = 0;
int64_t Now() { return g_now; }

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "plugin_driver: %s\n", what.c_str());
  std::exit(1);
}

void Check(NcclResult r, const char* what) {
  if (r != kNcclSuccess) Fail(std::string(what) + " returned " + std::to_string(r));
}

// One communicator's plugin, seen through version V's struct.
template <typename Api, typename Descr>
class Comm {
 public:
  Comm(const Api* api, void* context) : api_(api), context_(context) {}
  void* Start(Descr d) {
    void* h = nullptr;
    Check(api_->startEvent(context_, &h, &d), "startEvent");
    return h;
  }
  void Stop(void* h) { Check(api_->stopEvent(h), "stopEvent"); }
  void State(void* h, EventState s, size_t trans_size) {
    EventStateArgs a{};
    a.proxyStep.transSize = trans_size;
    Check(api_->recordEventState(h, s, &a), "recordEventState");
  }
  void KernelStop(void* h, uint64_t timer) {
    EventStateArgs a{};
    a.kernelCh.pTimer = timer;
    Check(api_->recordEventState(h, kKernelChStop, &a), "recordEventState");
    Stop(h);
  }
  void* ProxyOp(void* parent, pid_t pid, uint8_t channel, int peer, bool send) {
    Descr d{};
    d.type = kProfileProxyOp;
    d.parentObj = parent;
    d.proxyOp.pid = pid;
    d.proxyOp.channelId = channel;
    d.proxyOp.peer = peer;
    d.proxyOp.nSteps = kSteps;
    d.proxyOp.chunkSize = static_cast<int>(kChunk);
    d.proxyOp.isSend = send ? 1 : 0;
    return Start(d);
  }
  void* Step(void* proxy_op, int step) {
    Descr d{};
    d.type = kProfileProxyStep;
    d.parentObj = proxy_op;
    d.proxyStep.step = step;
    return Start(d);
  }
  void* KernelCh(void* parent, uint8_t channel, uint64_t timer) {
    Descr d{};
    d.type = kProfileKernelCh;
    d.parentObj = parent;
    d.kernelCh.channelId = channel;
    d.kernelCh.pTimer = timer;
    return Start(d);
  }
  // Send steps as sendProxyProgress reports them: GPU wait, peer wait, isend posted, done.
  void SendSteps(void* op, int64_t wire_ns) {
    for (int s = 0; s < kSteps; ++s) {
      void* h = Step(op, s);
      if (h == nullptr) Fail("no handle for a send step");
      State(h, kProxyStepSendGpuWait, 0);
      g_now += kUs;
      State(h, kProxyStepSendPeerWaitV4, 0);
      g_now += kUs;
      State(h, kProxyStepSendWait, kChunk);
      g_now += wire_ns;
      Stop(h);
    }
  }
  // Recv steps as recvProxyProgress reports them: irecv posted, received, flushed, consumed.
  void RecvSteps(void* op, int64_t wire_ns) {
    for (int s = 0; s < kSteps; ++s) {
      void* h = Step(op, s);
      if (h == nullptr) Fail("no handle for a recv step");
      State(h, kProxyStepRecvWait, 0);
      g_now += wire_ns;
      State(h, kProxyStepRecvFlushWait, kChunk);
      g_now += 5 * kUs;
      State(h, kProxyStepRecvGpuWait, kChunk);
      g_now += 5 * kUs;
      Stop(h);
    }
  }
  void Finalize() { Check(api_->finalize(context_), "finalize"); }

 private:
  const Api* api_;
  void* context_;
};

using CommV5 = Comm<ProfilerV5, EventDescrV5>;
using CommV4 = Comm<ProfilerV4, EventDescrV4>;

void* Group5(CommV5& c) {
  EventDescrV5 d{};
  d.type = kProfileGroup;
  return c.Start(d);
}

void RunCommA(CommV5& a) {
  for (int iteration = 0; iteration < 2; ++iteration) {
    void* group = Group5(a);
    EventDescrV5 d{};
    d.type = kProfileColl;
    d.rank = 1;
    d.coll.func = "AllReduce";
    d.coll.count = kChunk;  // Floats: 4 MiB.
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = 2;
    d.coll.parentGroup = group;
    void* coll = a.Start(d);
    if (group == nullptr || coll == nullptr) Fail("no handle for a group or a collective");
    g_now += 10 * kUs;
    a.Stop(coll);  // Enqueued.
    a.Stop(group);
    const uint64_t gpu0 = 1'000'000'000;
    void* k0 = a.KernelCh(coll, 0, gpu0);
    void* k1 = a.KernelCh(coll, 1, gpu0 + 1000);
    for (uint8_t ch = 0; ch < 2; ++ch) {
      void* send = a.ProxyOp(coll, getpid(), ch, /*peer=*/2, true);
      void* recv = a.ProxyOp(coll, getpid(), ch, /*peer=*/0, false);
      if (send == nullptr || recv == nullptr) Fail("no handle for a proxy op");
      a.State(send, kProxyOpInProgressV4, 0);
      a.State(recv, kProxyOpInProgressV4, 0);
      a.SendSteps(send, 10 * kUs);
      a.RecvSteps(recv, 200 * kUs);
      a.Stop(send);
      a.Stop(recv);
    }
    // PXN: posted by another process; its parent is that process's address.
    void* pxn =
        a.ProxyOp(reinterpret_cast<void*>(uintptr_t{0xdead0000}), getpid() + 100000, 0, 3, true);
    if (pxn != nullptr) Fail("a PXN proxy op got a handle");
    g_now += 3 * kUs;
    a.KernelStop(k0, gpu0 + 2'000'000);
    a.KernelStop(k1, gpu0 + 2'500'000);
    g_now += 3 * kUs;
  }
}

void RunCommB(CommV4& b) {
  EventDescrV4 g{};
  g.type = kProfileGroup;
  void* group = b.Start(g);
  EventDescrV4 d{};
  d.type = kProfileColl;
  d.parentObj = group;
  d.coll.func = "AllGather";
  d.coll.count = 1000;
  d.coll.datatype = "ncclFloat16";
  void* coll = b.Start(d);
  if (group == nullptr || coll == nullptr) Fail("v4: no handle for a group or a collective");
  g_now += 5 * kUs;
  b.Stop(coll);
  b.Stop(group);
  void* k = b.KernelCh(coll, 0, 7'000'000);
  g_now += 40 * kUs;
  b.KernelStop(k, 7'030'000);
}

void RunCommC(CommV5& c) {
  void* group = Group5(c);
  EventDescrV5 d{};
  d.type = kProfileP2p;
  d.p2p.func = "Send";
  d.p2p.count = 256;
  d.p2p.datatype = "ncclInt8";
  d.p2p.peer = 0;
  d.p2p.parentGroup = group;
  void* p2p = c.Start(d);
  c.Stop(p2p);
  c.Stop(group);
  void* send = c.ProxyOp(p2p, getpid(), 0, 0, true);
  c.SendSteps(send, 10 * kUs);
  c.Stop(send);
}

int Main(const char* socket) {
  const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
  if (name == nullptr) Fail("NCCL_PROFILER_PLUGIN unset");
  const std::string lib = std::strchr(name, '/') != nullptr
                              ? std::string(name)
                              : "libnccl-profiler-" + std::string(name) + ".so";
  void* so = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (so == nullptr) Fail(std::string("dlopen: ") + dlerror());
  const auto* v5 = static_cast<const ProfilerV5*>(dlsym(so, "ncclProfiler_v5"));
  const auto* v4 = static_cast<const ProfilerV4*>(dlsym(so, "ncclProfiler_v4"));
  const auto* v6 = static_cast<const ProfilerV6*>(dlsym(so, "ncclProfiler_v6"));
  auto* set_clock =
      reinterpret_cast<void (*)(int64_t(*)(void))>(dlsym(so, "falcon_nccl_profiler_set_clock"));
  auto* get_stats = reinterpret_cast<int32_t (*)(falcon_nccl_profiler_stats*)>(
      dlsym(so, "falcon_nccl_profiler_get_stats"));
  if (v5 == nullptr || v4 == nullptr || v6 == nullptr || set_clock == nullptr ||
      get_stats == nullptr) {
    Fail("a symbol is missing");
  }
  if (dlsym(so, "_ZN6falcon12trainer_shim15nccl_profiler12ProfilerCore9StopEventEPv") != nullptr) {
    Fail("internal symbols are exported");
  }
  std::printf("v4.name %s\nv5.name %s\nv6.name %s\n", v4->name, v5->name, v6->name);
  g_now = falcon_shim_now_ns();
  set_clock(&Now);

  // Comm A is created: NCCL runs the plugin's init inside the creation.
  int mask = 0;
  void* ctx_a = nullptr;
  Check(v5->init(&ctx_a, 0xA, &mask, "a", 2, 4, 1, nullptr), "init A");
  std::printf("activation_mask %d\n", mask);
  // The interposer starts the shim at the first comm, then binds and registers it.
  falcon_shim_options o;
  falcon_shim_options_init(&o);
  if (falcon_shim_init("plugin-driver", 2, 8, socket, &o) != FALCON_SHIM_OK) {
    Fail(std::string("falcon_shim_init: ") + falcon_shim_last_error());
  }
  const uint32_t members_a[] = {0, 2, 4, 6};
  const uint32_t members_b[] = {2, 3};
  if (falcon_shim_nccl_comm_bind(4, 1, 1001, members_a, 4) != FALCON_SHIM_OK ||
      falcon_shim_register_comm(1001, FALCON_SHIM_COMM_DP, members_a, 4, "a") != FALCON_SHIM_OK) {
    Fail(std::string("comm A: ") + falcon_shim_last_error());
  }
  void* ctx_b = nullptr;
  Check(v4->init(&ctx_b, &mask, "b", 0xB, 1, 2, 0, nullptr), "init B");
  if (falcon_shim_nccl_comm_bind(2, 0, 1002, members_b, 2) != FALCON_SHIM_OK ||
      falcon_shim_register_comm(1002, FALCON_SHIM_COMM_TP, members_b, 2, "b") != FALCON_SHIM_OK) {
    Fail(std::string("comm B: ") + falcon_shim_last_error());
  }
  void* ctx_c = nullptr;  // Never bound (as if its members were never learned).
  Check(v5->init(&ctx_c, 0xC, &mask, "c", 2, 4, 3, nullptr), "init C");
  // A communicator it cannot profile: success (an error could unload the plugin for every
  // communicator) with a null context, counted; calls with that context are no-ops.
  void* ctx_bad = reinterpret_cast<void*>(1);
  if (v5->init(&ctx_bad, 0xD, &mask, "bad", 1, 2, 5, nullptr) != kNcclSuccess ||
      ctx_bad != nullptr) {
    Fail("init with rank >= nranks: want success with a null context");
  }
  void* ignored = nullptr;
  Check(v5->startEvent(ctx_bad, &ignored, nullptr), "start with a null context");
  Check(v5->finalize(ctx_bad), "finalize a null context");

  CommV5 a(v5, ctx_a);
  CommV4 b(v4, ctx_b);
  CommV5 c(v5, ctx_c);
  RunCommA(a);
  RunCommB(b);
  RunCommC(c);
  a.Finalize();
  b.Finalize();
  c.Finalize();

  falcon_shim_stats s{};
  s.struct_size = sizeof(s);
  falcon_shim_get_stats(&s);
  std::printf("shim.records_unbound %llu\n", static_cast<unsigned long long>(s.records_unbound));
  falcon_nccl_profiler_stats p{};
  p.struct_size = sizeof(p);
  if (get_stats(&p) != 0) Fail("falcon_nccl_profiler_get_stats");
#define FALCON_PRINT(field) \
  std::printf("plugin." #field " %llu\n", static_cast<unsigned long long>(p.field))
  FALCON_PRINT(op_timing_plugin);
  FALCON_PRINT(contexts_opened);
  FALCON_PRINT(contexts_finalized);
  FALCON_PRINT(init_failures);
  FALCON_PRINT(ops_emitted);
  FALCON_PRINT(ops_forced);
  FALCON_PRINT(op_records_sent);
  FALCON_PRINT(op_records_refused);
  FALCON_PRINT(ops_unknown);
  FALCON_PRINT(transfers_sent);
  FALCON_PRINT(transfers_refused);
  FALCON_PRINT(events_dropped);
  FALCON_PRINT(pxn_proxy_ops);
  FALCON_PRINT(orphan_events);
  FALCON_PRINT(steps_without_network);
  FALCON_PRINT(internal_errors);
#undef FALCON_PRINT
  std::fflush(stdout);
  if (falcon_shim_shutdown() != FALCON_SHIM_OK) Fail("falcon_shim_shutdown");
  return 0;
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl_profiler

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: plugin_driver AGENT_SOCKET\n");
    return 2;
  }
  return falcon::trainer_shim::nccl_profiler::Main(argv[1]);
}
