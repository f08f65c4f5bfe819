// libnccl-profiler-falcon.so: NCCL's profiler plugin ABI (profiler_abi.h) over ProfilerCore, with
// the shim's C ABI (libfalcon_shim.so) as the sink. See README.md.
//
// Failure policy: NCCL is never disturbed. Every call returns ncclSuccess (init too: a
// communicator that cannot be profiled, for bad arguments, a handle the shim refuses or no
// memory, gets a null context and is counted in init_failures, since an init error could make
// NCCL unload the plugin for every communicator). Exceptions never leave a call; they are counted
// (internal_errors).
//
// Process-wide state, as NCCL's plugin ABI requires (the exported structs are globals): the
// counters, the handle sequence and FALCON_NCCL_OP_TIMING, read once.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/nccl/interposer_config.h"
#include "trainer_shim/nccl_profiler/plugin_stats.h"
#include "trainer_shim/nccl_profiler/profiler_abi.h"
#include "trainer_shim/nccl_profiler/profiler_core.h"

namespace falcon::trainer_shim::nccl_profiler {
namespace {

// Events the plugin asks NCCL for.
constexpr int kActivationMask =
    kProfileColl | kProfileP2p | kProfileProxyOp | kProfileProxyStep | kProfileKernelCh;

// CLOCK_MONOTONIC, or the driver's clock (falcon_nccl_profiler_set_clock).
class PluginClock : public common::Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  int64_t MonotonicNanos() const override {
    int64_t (*hook)(void) = hook_.load(std::memory_order_acquire);
    return hook != nullptr ? hook() : falcon_shim_now_ns();
  }
  void Set(int64_t (*hook)(void)) { hook_.store(hook, std::memory_order_release); }

 private:
  std::atomic<int64_t (*)(void)> hook_{nullptr};
};

struct Process {
  CoreCounters counters;
  std::atomic<uint64_t> contexts_opened{0};
  std::atomic<uint64_t> contexts_finalized{0};
  std::atomic<uint64_t> init_failures{0};
  std::atomic<uint64_t> next_handle{1};
  PluginClock clock;
  const bool op_timing_plugin = nccl::OpTimingFromEnv([](const char* name) {
                                  return std::getenv(name);
                                }) == nccl::OpTiming::kPlugin;
};

Process& P() {
  static Process* const p = new Process();  // Never destroyed: NCCL may call during exit.
  return *p;
}

class ShimSink : public RecordSink {
 public:
  explicit ShimSink(uint64_t handle) : handle_(handle) {}
  bool RecordPeerTransfer(const falcon_shim_peer_transfer& t) override {
    return falcon_shim_record_peer_transfer(&t) == FALCON_SHIM_OK;
  }
  bool RecordOp(const falcon_shim_op& op) override {
    return falcon_shim_record_nccl_op(handle_, &op) == FALCON_SHIM_OK;
  }

 private:
  const uint64_t handle_;
};

struct Context {
  Context(uint64_t handle, const ProfilerCore::Options& o)
      : sink(handle), core(o, P().clock, &sink, &P().counters) {}
  ShimSink sink;
  ProfilerCore core;
};

void CountInternal() { P().counters.internal_errors.fetch_add(1, std::memory_order_relaxed); }

NcclResult Init(void** context, int* activation_mask, int nranks, int rank, NcclDebugLogger logfn) {
  try {
    if (context == nullptr) return kNcclInternalError;
    *context = nullptr;
    Process& p = P();
    // A communicator the plugin cannot profile gets a null context and success: an error would make
    // some NCCL versions unload the plugin for every communicator. Null contexts are ignored.
    if (activation_mask == nullptr || nranks <= 0 || rank < 0 || rank >= nranks) {
      p.init_failures.fetch_add(1, std::memory_order_relaxed);
      return kNcclSuccess;
    }
    const uint64_t handle = p.next_handle.fetch_add(1, std::memory_order_relaxed);
    if (falcon_shim_nccl_comm_open(handle, static_cast<uint32_t>(nranks),
                                   static_cast<uint32_t>(rank)) != FALCON_SHIM_OK) {
      p.init_failures.fetch_add(1, std::memory_order_relaxed);
      if (logfn != nullptr) {
        logfn(kNcclLogWarn, kNcclLogInit, __FILE__, __LINE__,
              "falcon profiler: communicator not profiled (shim: %s)", falcon_shim_last_error());
      }
      return kNcclSuccess;
    }
    ProfilerCore::Options o;
    o.handle = handle;
    o.nranks = static_cast<uint32_t>(nranks);
    o.rank = static_cast<uint32_t>(rank);
    o.pid = getpid();
    o.emit_ops = p.op_timing_plugin;
    auto* c = new (std::nothrow) Context(handle, o);
    if (c == nullptr) {
      (void)falcon_shim_nccl_comm_close(handle);
      p.init_failures.fetch_add(1, std::memory_order_relaxed);
      return kNcclSuccess;
    }
    *activation_mask = kActivationMask;
    *context = c;
    p.contexts_opened.fetch_add(1, std::memory_order_relaxed);
    if (logfn != nullptr) {
      logfn(kNcclLogInfo, kNcclLogInit, __FILE__, __LINE__,
            "falcon profiler: nranks %d rank %d handle %lu op records by %s", nranks, rank,
            static_cast<unsigned long>(handle), p.op_timing_plugin ? "plugin" : "interposer");
    }
    return kNcclSuccess;
  } catch (...) {
    P().init_failures.fetch_add(1, std::memory_order_relaxed);
    return kNcclSuccess;  // With the context set so far (null unless complete): see above.
  }
}

NcclResult InitV4(void** context, int* activation_mask, const char* /*comm_name*/,
                  uint64_t /*comm_hash*/, int /*n_nodes*/, int nranks, int rank,
                  NcclDebugLogger logfn) {
  return Init(context, activation_mask, nranks, rank, logfn);
}

NcclResult InitV5(void** context, uint64_t /*comm_id*/, int* activation_mask,
                  const char* /*comm_name*/, int /*n_nodes*/, int nranks, int rank,
                  NcclDebugLogger logfn) {
  return Init(context, activation_mask, nranks, rank, logfn);
}

// Shared by the descriptor versions: `group_of` gives a Coll/P2p's Group handle.
template <typename Descr, typename GroupOfColl, typename GroupOfP2p>
NcclResult Start(void* context, void** handle, const Descr* d, GroupOfColl group_of_coll,
                 GroupOfP2p group_of_p2p) {
  try {
    if (handle == nullptr) return kNcclSuccess;
    *handle = nullptr;
    if (context == nullptr || d == nullptr) return kNcclSuccess;
    ProfilerCore& core = static_cast<Context*>(context)->core;
    switch (static_cast<uint64_t>(d->type)) {
      case kProfileGroup:
        *handle = core.StartGroup();
        break;
      case kProfileColl:
        *handle = core.StartColl(group_of_coll(*d), d->coll.func, d->coll.count, d->coll.datatype);
        break;
      case kProfileP2p:
        *handle = core.StartP2p(group_of_p2p(*d), d->p2p.func, d->p2p.count, d->p2p.datatype,
                                d->p2p.peer);
        break;
      case kProfileProxyOp:
        *handle = core.StartProxyOp(d->parentObj, d->proxyOp.pid, d->proxyOp.channelId,
                                    d->proxyOp.peer, d->proxyOp.isSend != 0);
        break;
      case kProfileProxyStep:
        *handle = core.StartProxyStep(d->parentObj);
        break;
      case kProfileKernelCh:
        *handle = core.StartKernelCh(d->parentObj, d->kernelCh.channelId, d->kernelCh.pTimer);
        break;
      default:
        *handle = core.Ignored();
        break;
    }
  } catch (...) {
    CountInternal();
  }
  return kNcclSuccess;
}

NcclResult StartV4(void* context, void** handle, EventDescrV4* d) {
  return Start(
      context, handle, d, [](const EventDescrV4& e) { return e.parentObj; },
      [](const EventDescrV4& e) { return e.parentObj; });
}

template <typename Descr>
NcclResult StartV5Like(void* context, void** handle, Descr* d) {
  return Start(
      context, handle, d, [](const Descr& e) { return e.coll.parentGroup; },
      [](const Descr& e) { return e.p2p.parentGroup; });
}

NcclResult Stop(void* handle) {
  try {
    ProfilerCore::StopEvent(handle);
  } catch (...) {
    CountInternal();
  }
  return kNcclSuccess;
}

NcclResult RecordState(void* handle, EventState state, EventStateArgs* args) {
  try {
    ProfilerCore::RecordEventState(handle, state, args);
  } catch (...) {
    CountInternal();
  }
  return kNcclSuccess;
}

NcclResult Finalize(void* context) {
  try {
    if (context == nullptr) return kNcclSuccess;
    auto* c = static_cast<Context*>(context);
    c->core.Flush();
    const uint64_t handle = c->core.handle();
    delete c;
    (void)falcon_shim_nccl_comm_close(handle);
    P().contexts_finalized.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    CountInternal();
  }
  return kNcclSuccess;
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl_profiler

namespace npf = ::falcon::trainer_shim::nccl_profiler;

extern "C" {

__attribute__((visibility("default"))) npf::ProfilerV4 ncclProfiler_v4 = {
    "falcon", npf::InitV4, npf::StartV4, npf::Stop, npf::RecordState, npf::Finalize};

__attribute__((visibility("default")))
npf::ProfilerV5 ncclProfiler_v5 = {"falcon",  npf::InitV5,      npf::StartV5Like<npf::EventDescrV5>,
                                   npf::Stop, npf::RecordState, npf::Finalize};

__attribute__((visibility("default")))
npf::ProfilerV6 ncclProfiler_v6 = {"falcon",  npf::InitV5,      npf::StartV5Like<npf::EventDescrV6>,
                                   npf::Stop, npf::RecordState, npf::Finalize};

__attribute__((visibility("default"))) void falcon_nccl_profiler_set_clock(
    int64_t (*now_ns)(void)) {
  npf::P().clock.Set(now_ns);
}

__attribute__((visibility("default"))) int32_t falcon_nccl_profiler_get_stats(
    falcon_nccl_profiler_stats* stats) {
  if (stats == nullptr || stats->struct_size < sizeof(uint32_t)) return -1;
  try {
    npf::Process& p = npf::P();
    const npf::CoreCounters& c = p.counters;
    falcon_nccl_profiler_stats s{};
    s.struct_size = sizeof(s);
    s.op_timing_plugin = p.op_timing_plugin ? 1 : 0;
    s.contexts_opened = p.contexts_opened.load();
    s.contexts_finalized = p.contexts_finalized.load();
    s.init_failures = p.init_failures.load();
    s.ops_emitted = c.ops_emitted.load();
    s.ops_forced = c.ops_forced.load();
    s.op_records_sent = c.op_records_sent.load();
    s.op_records_refused = c.op_records_refused.load();
    s.ops_unknown = c.ops_unknown.load();
    s.transfers_sent = c.transfers_sent.load();
    s.transfers_refused = c.transfers_refused.load();
    s.events_dropped = c.events_dropped.load();
    s.pxn_proxy_ops = c.pxn_proxy_ops.load();
    s.orphan_events = c.orphan_events.load();
    s.steps_without_network = c.steps_without_network.load();
    s.intervals_coalesced = c.intervals_coalesced.load();
    s.internal_errors = c.internal_errors.load();
    const uint32_t size = stats->struct_size < sizeof(s) ? stats->struct_size : sizeof(s);
    std::memcpy(static_cast<void*>(stats), &s, size);
    stats->struct_size = size;
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
