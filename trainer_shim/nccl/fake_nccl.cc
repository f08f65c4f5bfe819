// libfake_nccl.so: a deterministic test double of libnccl and the few CUDA runtime calls the
// interposer makes, so the interposer is tested without a GPU. It exports the real symbols with
// the real signatures (from nccl.h / cuda_runtime_api.h).
//
// One process plays one rank; the other members are simulated by fixed rules over host memory
// ("device" memory is malloc'd):
//   AllReduce/Reduce (at root): recv = op over nranks equal contributions (sum: x * nranks).
//   AllGather: block j = send + (j - rank), i.e. member j contributed my data shifted by j - rank
//     (so an all-gather of global ranks yields consecutive ranks around mine).
//   ReduceScatter: recv = my slice of send, reduced as above. Broadcast: recv = send.
//   Recv: recv[i] = peer * 1000 + i. Send: nothing.
//   CommSplit: child size = ceil(parent size / 2), child rank = parent rank / 2; NOCOLOR -> NULL.
// Ops inside ncclGroupStart/End run at the outermost ncclGroupEnd, as in NCCL. Every call is
// appended to a log (fake_nccl_log) so a test can compare what reached "NCCL".
// CUDA events: cudaEventRecord stamps a counter; elapsed time = 0.25 ms per stamp in between.
// With FAKE_CUDA_LAST_EVENT_PENDING=1 the event recorded last is not complete yet
// (cudaEventQuery says cudaErrorNotReady), as the GPU still runs the last op.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct FakeComm {
  int index;
  int nranks;
  int rank;
};

struct FakeEvent {
  int64_t stamp = 0;
};

std::mutex g_mu;
std::string g_log;
int g_next_comm = 0;
int g_unique_ids = 0;
int g_group_depth = 0;
int64_t g_event_clock = 0;
std::vector<std::function<void()>> g_group_ops;

void Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_log += line;
  g_log += "\n";
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

ncclResult_t RunOrDefer(std::function<void()> op) {
  if (g_group_depth > 0) {
    g_group_ops.push_back(std::move(op));
  } else {
    op();
  }
  return ncclSuccess;
}

template <typename T>
void Reduce(const T* in, T* out, size_t n, ncclRedOp_t op, int nranks) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case ncclSum:
        out[i] = static_cast<T>(in[i] * nranks);
        break;
      case ncclProd:
        out[i] = static_cast<T>(std::pow(static_cast<double>(in[i]), nranks));
        break;
      default:  // max, min, avg of equal values.
        out[i] = in[i];
    }
  }
}

bool ReduceTyped(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t op, int k) {
  switch (t) {
    case ncclInt32:
      Reduce(static_cast<const int32_t*>(in), static_cast<int32_t*>(out), n, op, k);
      return true;
    case ncclInt64:
      Reduce(static_cast<const int64_t*>(in), static_cast<int64_t*>(out), n, op, k);
      return true;
    case ncclFloat32:
      Reduce(static_cast<const float*>(in), static_cast<float*>(out), n, op, k);
      return true;
    case ncclFloat64:
      Reduce(static_cast<const double*>(in), static_cast<double*>(out), n, op, k);
      return true;
    default:
      return false;
  }
}

size_t Size(ncclDataType_t t) {
  switch (t) {
    case ncclInt32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

template <typename T>
void Shifted(const T* in, T* out, size_t n, int shift) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i] + shift);
}

void ShiftedTyped(const void* in, void* out, size_t n, ncclDataType_t t, int shift) {
  switch (t) {
    case ncclInt32:
      Shifted(static_cast<const int32_t*>(in), static_cast<int32_t*>(out), n, shift);
      break;
    case ncclInt64:
      Shifted(static_cast<const int64_t*>(in), static_cast<int64_t*>(out), n, shift);
      break;
    case ncclFloat32:
      Shifted(static_cast<const float*>(in), static_cast<float*>(out), n, shift);
      break;
    case ncclFloat64:
      Shifted(static_cast<const double*>(in), static_cast<double*>(out), n, shift);
      break;
    default:
      break;
  }
}

FakeComm* C(ncclComm_t comm) { return reinterpret_cast<FakeComm*>(comm); }

ncclResult_t NewComm(ncclComm_t* out, int nranks, int rank, const char* how) {
  if (out == nullptr || nranks <= 0 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto* c = new FakeComm{g_next_comm++, nranks, rank};
  *out = reinterpret_cast<ncclComm_t>(c);
  Log(Fmt("%s comm=%d nranks=%d rank=%d", how, c->index, nranks, rank));
  return ncclSuccess;
}

}  // namespace

extern "C" {

// Test-only: the call log since the last clear.
const char* fake_nccl_log(void) {
  static std::string copy;
  std::lock_guard<std::mutex> lock(g_mu);
  copy = g_log;
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::snprintf(id->internal, sizeof(id->internal), "fake-unique-id-%d", g_unique_ids++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  return NewComm(comm, nranks, rank, "CommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                    ncclConfig_t*) {
  return NewComm(comm, nranks, rank, "CommInitRankConfig");
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t*) {
  if (comm == nullptr || newcomm == nullptr) return ncclInvalidArgument;
  Log(Fmt("CommSplit parent=%d color=%d key=%d", C(comm)->index, color, key));
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  return NewComm(newcomm, (C(comm)->nranks + 1) / 2, C(comm)->rank / 2, "SplitChild");
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  Log(Fmt("CommDestroy comm=%d", C(comm)->index));
  delete C(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = C(comm)->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = C(comm)->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = 0;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || Size(datatype) == 0) return ncclInvalidArgument;
  Log(Fmt("AllReduce comm=%d count=%zu type=%d op=%d", C(comm)->index, count, datatype, op));
  const int n = C(comm)->nranks;
  return RunOrDefer([=] { ReduceTyped(sendbuff, recvbuff, count, datatype, op, n); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || Size(datatype) == 0) return ncclInvalidArgument;
  Log(Fmt("AllGather comm=%d count=%zu type=%d", C(comm)->index, sendcount, datatype));
  const FakeComm c = *C(comm);
  return RunOrDefer([=] {
    for (int j = 0; j < c.nranks; ++j) {
      ShiftedTyped(sendbuff, static_cast<char*>(recvbuff) + j * sendcount * Size(datatype),
                   sendcount, datatype, j - c.rank);
    }
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t) {
  if (comm == nullptr || Size(datatype) == 0) return ncclInvalidArgument;
  Log(Fmt("ReduceScatter comm=%d count=%zu type=%d op=%d", C(comm)->index, recvcount, datatype,
          op));
  const FakeComm c = *C(comm);
  return RunOrDefer([=] {
    ReduceTyped(static_cast<const char*>(sendbuff) + c.rank * recvcount * Size(datatype), recvbuff,
                recvcount, datatype, op, c.nranks);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || Size(datatype) == 0) return ncclInvalidArgument;
  Log(Fmt("Broadcast comm=%d count=%zu type=%d root=%d", C(comm)->index, count, datatype, root));
  return RunOrDefer([=] { std::memmove(recvbuff, sendbuff, count * Size(datatype)); });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || Size(datatype) == 0) return ncclInvalidArgument;
  Log(Fmt("Reduce comm=%d count=%zu type=%d op=%d root=%d", C(comm)->index, count, datatype, op,
          root));
  const FakeComm c = *C(comm);
  return RunOrDefer([=] {
    if (c.rank == root) ReduceTyped(sendbuff, recvbuff, count, datatype, op, c.nranks);
  });
}

ncclResult_t ncclSend(const void*, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t) {
  if (comm == nullptr || peer < 0 || peer >= C(comm)->nranks) return ncclInvalidArgument;
  Log(Fmt("Send comm=%d count=%zu type=%d peer=%d", C(comm)->index, count, datatype, peer));
  return RunOrDefer([] {});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr || peer < 0 || peer >= C(comm)->nranks) return ncclInvalidArgument;
  if (datatype != ncclFloat32) return ncclInvalidArgument;
  Log(Fmt("Recv comm=%d count=%zu type=%d peer=%d", C(comm)->index, count, datatype, peer));
  return RunOrDefer([=] {
    for (size_t i = 0; i < count; ++i) static_cast<float*>(recvbuff)[i] = peer * 1000.0f + i;
  });
}

ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  Log("GroupStart");
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return ncclInvalidUsage;
  Log(Fmt("GroupEnd depth=%d", g_group_depth));
  if (--g_group_depth == 0) {
    std::vector<std::function<void()>> ops = std::move(g_group_ops);
    g_group_ops.clear();
    for (auto& op : ops) op();
  }
  return ncclSuccess;
}

// --- CUDA runtime doubles. ---

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaMalloc(void** ptr, size_t size) {
  *ptr = std::malloc(size == 0 ? 1 : size);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  std::memmove(dst, src, count);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new FakeEvent());
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  std::lock_guard<std::mutex> lock(g_mu);
  reinterpret_cast<FakeEvent*>(event)->stamp = ++g_event_clock;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  static const bool last_pending = [] {
    const char* v = std::getenv("FAKE_CUDA_LAST_EVENT_PENDING");
    return v != nullptr && std::string(v) == "1";
  }();
  std::lock_guard<std::mutex> lock(g_mu);
  const bool pending = last_pending && reinterpret_cast<FakeEvent*>(event)->stamp == g_event_clock;
  return pending ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = 0.25f * static_cast<float>(reinterpret_cast<FakeEvent*>(end)->stamp -
                                   reinterpret_cast<FakeEvent*>(start)->stamp);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<FakeEvent*>(event);
  return cudaSuccess;
}

}  // extern "C"
