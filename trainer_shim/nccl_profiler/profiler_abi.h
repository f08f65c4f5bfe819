// The NCCL profiler plugin ABI, as far as libnccl-profiler-falcon.so uses it, declared from NCCL's
// profiler plugin documentation (ext-profiler/README.md and the versioned declarations NCCL
// publishes for plugin authors). No NCCL header is included: the CUDA toolkit here ships nccl.h but
// no profiler headers, and the plugin builds CPU-only. What makes the ABI is the layout (member
// types, order, alignment) and the enum values; the names below follow NCCL's member names so the
// declarations can be compared with NCCL's, the type names are our own.
//
// Versions (NCCL looks up the symbol ncclProfiler_v<N> of the newest version it speaks, then older
// ones):
//   v4  ncclProfiler_v4  NCCL 2.27 asks for it first; 2.28 and 2.29 still accept it.
//   v5  ncclProfiler_v5  NCCL 2.28 (2.28.9 is installed here) asks for it first; 2.29 accepts it.
//   v6  ncclProfiler_v6  NCCL 2.29: v5's layout plus copy-engine (CE) collective descriptors in
//                        the union (which does not grow) and CE event types and states.
// Layouts are checked for x86-64 (LP64) by the static_asserts at the end.
//
// Event hierarchy (parentObj is the handle the plugin returned for the parent):
//   Group -> Coll | P2p -> ProxyOp -> ProxyStep;  Coll | P2p -> KernelCh.
//   v5 adds API events (GroupApi -> CollApi | P2pApi -> KernelLaunch) above Group; a v5 Coll's
//   parentObj is its CollApi event, its Group is in coll.parentGroup.
// A ProxyOp whose pid is not this process's was posted by another process (PXN: a GPU of this
// node sends through the NIC of another GPU's process); its parentObj is an address in that
// process and must never be dereferenced.
#ifndef FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_ABI_H_
#define FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_ABI_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace falcon::trainer_shim::nccl_profiler {

// ncclResult_t (a C enum: int-sized). The values the plugin returns.
using NcclResult = int;
inline constexpr NcclResult kNcclSuccess = 0;
inline constexpr NcclResult kNcclInternalError = 3;

// ncclDebugLogger_t: NCCL's logger handed to init. level: ncclDebugLogLevel (2 = WARN, 3 = INFO);
// flags: ncclDebugLogSubSys bits (1 = INIT).
using NcclDebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                                 const char* fmt, ...);
inline constexpr int kNcclLogWarn = 2;
inline constexpr int kNcclLogInfo = 3;
inline constexpr unsigned long kNcclLogInit = 1;

// Event types (descriptor `type`, and the bits of the activation mask init sets). Same values in
// every version; v5 added the API and kernel-launch events, v6 the CE events.
enum EventType : uint64_t {
  kProfileGroup = 1u << 0,
  kProfileColl = 1u << 1,
  kProfileP2p = 1u << 2,
  kProfileProxyOp = 1u << 3,
  kProfileProxyStep = 1u << 4,
  kProfileProxyCtrl = 1u << 5,
  kProfileKernelCh = 1u << 6,
  kProfileNetPlugin = 1u << 7,
  kProfileGroupApi = 1u << 8,       // v5
  kProfileCollApi = 1u << 9,        // v5
  kProfileP2pApi = 1u << 10,        // v5
  kProfileKernelLaunch = 1u << 11,  // v5
  kProfileCeColl = 1u << 12,        // v6
  kProfileCeSync = 1u << 13,        // v6
  kProfileCeBatch = 1u << 14,       // v6
};

// ncclProfilerEventState_t (int-sized C enum), shared by v4, v5 and v6. Values 0-7 are the
// ProxyOp states of v1-v3, deprecated by v4 (a v4+ ProxyOp only reports InProgress).
enum EventState : int {
  kProxyOpInProgressV4 = 19,      // ProxyOp: picked up by the proxy progress function.
  kProxyStepSendGpuWait = 8,      // Send step: waiting for the GPU to fill the buffer.
  kProxyStepSendPeerWaitV4 = 20,  // Send step: data ready, waiting for the receiver's credit.
  kProxyStepSendWait = 9,         // Send step: posted to the network (isend), waiting for it.
  kProxyStepRecvWait = 10,        // Recv step: receive posted (irecv), waiting for the data.
  kProxyStepRecvFlushWait = 11,   // Recv step: data received, flushing it to the GPU.
  kProxyStepRecvGpuWait = 12,     // Recv step: waiting for the GPU to consume it.
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kNetPluginUpdate = 21,
  kKernelChStop = 22,       // KernelCh: args->kernelCh.pTimer is the GPU stop time.
  kGroupStartApiStop = 23,  // v5 GroupApi
  kGroupEndApiStart = 24,   // v5 GroupApi
  kCeCollStart = 25,        // v6 CE states
  kCeCollComplete = 26,
  kCeSyncStart = 27,
  kCeSyncComplete = 28,
  kCeBatchStart = 29,
  kCeBatchComplete = 30,
};

// Members shared by several descriptor versions.
struct ProxyOpDescr {  // v4, v5, v6
  pid_t pid;           // Process that posted the op (PXN: another process).
  uint8_t channelId;
  int peer;  // Communicator rank of the remote end.
  int nSteps;
  int chunkSize;
  int isSend;  // 1 send, 0 recv.
};
struct ProxyStepDescr {  // v4, v5, v6
  int step;
};
struct KernelChDescr {  // v4, v5, v6
  uint8_t channelId;
  uint64_t pTimer;  // GPU globaltimer (ns) when the channel started.
};
struct NetPluginDescr {  // v4, v5, v6
  int64_t id;
  void* data;
};

// ---- v4: ncclProfilerEventDescr_v4_t (NCCL 2.27; accepted by 2.28 and 2.29).
struct CollDescrV4 {
  uint64_t seqNumber;
  const char* func;  // "AllReduce", ...
  const void* sendBuff;
  void* recvBuff;
  size_t count;  // Elements (ReduceScatter: per rank, the receive count).
  int root;
  const char* datatype;  // "ncclFloat32", ...
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};
struct P2pDescrV4 {
  const char* func;  // "Send" / "Recv"
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
};
struct EventDescrV4 {
  uint8_t type;  // EventType (one bit)
  void* parentObj;
  int rank;
  union {
    CollDescrV4 coll;
    P2pDescrV4 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

// ---- v5: ncclProfilerEventDescr_v5_t (NCCL 2.28; accepted by 2.29).
struct GroupApiDescrV5 {
  bool graphCaptured;  // bool in NCCL's v5 and v6 headers (an early example copy has int: the
                       // offsets are the same, groupDepth is 4-aligned either way).
  int groupDepth;
};
struct CollApiDescrV5 {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};
struct P2pApiDescrV5 {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};
struct KernelLaunchDescrV5 {
  void* stream;
};
struct CollDescrV5 {  // CollDescrV4 + parentGroup
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;  // The Group event (v4's parentObj).
};
struct P2pDescrV5 {  // P2pDescrV4 + parentGroup
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
};
struct EventDescrV5 {
  uint64_t type;  // EventType (one bit)
  void* parentObj;
  int rank;
  union {
    GroupApiDescrV5 groupApi;
    CollApiDescrV5 collApi;
    P2pApiDescrV5 p2pApi;
    KernelLaunchDescrV5 kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};

// ---- v6: ncclProfilerEventDescr_v6_t (NCCL 2.29): v5's members at v5's offsets, plus CE ones.
struct CeCollDescrV6 {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};
struct CeSyncDescrV6 {
  bool isComplete;
  int nRanks;
};
struct CeBatchDescrV6 {
  int numOps;
  size_t totalBytes;
  bool useIntraSync;
};
struct EventDescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    GroupApiDescrV5 groupApi;
    CollApiDescrV5 collApi;
    P2pApiDescrV5 p2pApi;
    KernelLaunchDescrV5 kernelLaunch;
    CollDescrV5 coll;
    P2pDescrV5 p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
    CeCollDescrV6 ceColl;
    CeSyncDescrV6 ceCollSync;
    CeBatchDescrV6 ceCollBatch;
    // Later NCCL trees add a kernel-step member here that is smaller than the largest member:
    // the union's size and every offset above stay as asserted below.
  };
};

// ncclProfilerEventStateArgs_v4_t / _v5_t / _v6_t (one layout). NCCL passes transSize with every
// ProxyStep state: the bytes of the step's last network transfer (valid from SendWait on for a
// send, from RecvFlushWait on for a recv).
union EventStateArgs {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // KernelChStop: GPU globaltimer (ns) when the channel finished.
  } kernelCh;
};

// ncclProfiler_v4_t.
struct ProfilerV4 {
  const char* name;
  NcclResult (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                     int nNodes, int nranks, int rank, NcclDebugLogger logfn);
  NcclResult (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  NcclResult (*stopEvent)(void* eHandle);
  NcclResult (*recordEventState)(void* eHandle, EventState eState, EventStateArgs* eStateArgs);
  NcclResult (*finalize)(void* context);
};

// ncclProfiler_v5_t; ncclProfiler_v6_t is the same with EventDescrV6.
template <typename Descr>
struct ProfilerV5Like {
  const char* name;
  NcclResult (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                     int nNodes, int nranks, int rank, NcclDebugLogger logfn);
  NcclResult (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  NcclResult (*stopEvent)(void* eHandle);
  NcclResult (*recordEventState)(void* eHandle, EventState eState, EventStateArgs* eStateArgs);
  NcclResult (*finalize)(void* context);
};
using ProfilerV5 = ProfilerV5Like<EventDescrV5>;
using ProfilerV6 = ProfilerV5Like<EventDescrV6>;

// ---- Layout checks (x86-64).
#if defined(__x86_64__)
static_assert(sizeof(EventState) == 4 && sizeof(NcclResult) == 4, "C enums are int-sized");
static_assert(sizeof(pid_t) == 4, "pid_t");
static_assert(sizeof(ProxyOpDescr) == 24 && offsetof(ProxyOpDescr, channelId) == 4 &&
                  offsetof(ProxyOpDescr, peer) == 8 && offsetof(ProxyOpDescr, nSteps) == 12 &&
                  offsetof(ProxyOpDescr, chunkSize) == 16 && offsetof(ProxyOpDescr, isSend) == 20,
              "proxyOp");
static_assert(sizeof(ProxyStepDescr) == 4, "proxyStep");
static_assert(sizeof(KernelChDescr) == 16 && offsetof(KernelChDescr, pTimer) == 8, "kernelCh");
static_assert(sizeof(NetPluginDescr) == 16, "netPlugin");

static_assert(sizeof(CollDescrV4) == 80 && offsetof(CollDescrV4, func) == 8 &&
                  offsetof(CollDescrV4, count) == 32 && offsetof(CollDescrV4, root) == 40 &&
                  offsetof(CollDescrV4, datatype) == 48 && offsetof(CollDescrV4, nChannels) == 56 &&
                  offsetof(CollDescrV4, nWarps) == 57 && offsetof(CollDescrV4, algo) == 64 &&
                  offsetof(CollDescrV4, proto) == 72,
              "coll v4");
static_assert(sizeof(P2pDescrV4) == 40 && offsetof(P2pDescrV4, datatype) == 16 &&
                  offsetof(P2pDescrV4, count) == 24 && offsetof(P2pDescrV4, peer) == 32 &&
                  offsetof(P2pDescrV4, nChannels) == 36,
              "p2p v4");
static_assert(sizeof(EventDescrV4) == 104 && offsetof(EventDescrV4, parentObj) == 8 &&
                  offsetof(EventDescrV4, rank) == 16 && offsetof(EventDescrV4, coll) == 24 &&
                  offsetof(EventDescrV4, proxyOp) == 24,
              "ncclProfilerEventDescr_v4_t");

static_assert(sizeof(GroupApiDescrV5) == 8 && offsetof(GroupApiDescrV5, groupDepth) == 4, "");
static_assert(sizeof(CollApiDescrV5) == 48 && offsetof(CollApiDescrV5, root) == 24 &&
                  offsetof(CollApiDescrV5, stream) == 32 &&
                  offsetof(CollApiDescrV5, graphCaptured) == 40,
              "collApi v5");
static_assert(sizeof(P2pApiDescrV5) == 40 && offsetof(P2pApiDescrV5, stream) == 24 &&
                  offsetof(P2pApiDescrV5, graphCaptured) == 32,
              "p2pApi v5");
static_assert(sizeof(CollDescrV5) == 88 && offsetof(CollDescrV5, count) == 32 &&
                  offsetof(CollDescrV5, datatype) == 48 && offsetof(CollDescrV5, nChannels) == 56 &&
                  offsetof(CollDescrV5, proto) == 72 && offsetof(CollDescrV5, parentGroup) == 80,
              "coll v5");
static_assert(sizeof(P2pDescrV5) == 48 && offsetof(P2pDescrV5, peer) == 32 &&
                  offsetof(P2pDescrV5, nChannels) == 36 && offsetof(P2pDescrV5, parentGroup) == 40,
              "p2p v5");
static_assert(sizeof(EventDescrV5) == 112 && offsetof(EventDescrV5, parentObj) == 8 &&
                  offsetof(EventDescrV5, rank) == 16 && offsetof(EventDescrV5, coll) == 24 &&
                  offsetof(EventDescrV5, proxyOp) == 24 && offsetof(EventDescrV5, kernelCh) == 24,
              "ncclProfilerEventDescr_v5_t");

static_assert(sizeof(CeCollDescrV6) == 88 && offsetof(CeCollDescrV6, syncStrategy) == 56 &&
                  offsetof(CeCollDescrV6, intraBatchSync) == 64 &&
                  offsetof(CeCollDescrV6, batchSize) == 68 &&
                  offsetof(CeCollDescrV6, ceSeqNum) == 76 && offsetof(CeCollDescrV6, stream) == 80,
              "ceColl v6");
static_assert(sizeof(CeSyncDescrV6) == 8 && sizeof(CeBatchDescrV6) == 24, "ceSync / ceBatch v6");
static_assert(sizeof(EventDescrV6) == sizeof(EventDescrV5) &&
                  offsetof(EventDescrV6, coll) == offsetof(EventDescrV5, coll) &&
                  offsetof(EventDescrV6, ceColl) == 24,
              "ncclProfilerEventDescr_v6_t: v5's layout, the union does not grow");

static_assert(sizeof(EventStateArgs) == 8, "ncclProfilerEventStateArgs_v4/v5/v6_t");
static_assert(sizeof(ProfilerV4) == 48 && offsetof(ProfilerV4, startEvent) == 16 &&
                  offsetof(ProfilerV4, finalize) == 40,
              "ncclProfiler_v4_t");
static_assert(sizeof(ProfilerV5) == 48 && sizeof(ProfilerV6) == 48, "ncclProfiler_v5_t / v6_t");
#endif

}  // namespace falcon::trainer_shim::nccl_profiler

#endif  // FALCON_TRAINER_SHIM_NCCL_PROFILER_PROFILER_ABI_H_
