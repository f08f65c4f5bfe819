// libfalcon_nccl.so: LD_PRELOAD wrappers of the NCCL API (see interposer.h). Each wrapper makes
// exactly the call the application made, with its arguments, and returns NCCL's result; the
// interposer's work around it is guarded so that no exception or failure can reach the caller.
#include <nccl.h>

#include <cstdint>

#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/nccl/interposer.h"
#include "trainer_shim/nccl/real_nccl.h"

namespace {

using falcon::trainer_shim::nccl::Interposer;
using falcon::trainer_shim::nccl::Real;

uint64_t TypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool ConfigBlocking(const ncclConfig_t* config) {
  return config == nullptr || config->blocking != 0;  // NCCL_CONFIG_UNDEF_INT: the default.
}

template <typename Call>
ncclResult_t Op(int32_t kind, ncclComm_t comm, cudaStream_t stream, uint64_t bytes, int peer,
                bool scale, Call call) {
  Interposer* ip = Interposer::Get();
  if (ip == nullptr) return call();
  Interposer::OpToken token;
  try {
    token = ip->BeginOp(kind, comm, stream, bytes, peer, scale);
  } catch (...) {
    token = Interposer::OpToken();
  }
  const ncclResult_t result = call();
  try {
    ip->EndOp(token, result);
  } catch (...) {
  }
  return result;
}

template <typename Hook>
void Guarded(Hook hook) {
  Interposer* ip = Interposer::Get();
  if (ip == nullptr) return;
  try {
    hook(ip);
  } catch (...) {
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  const auto real = Real().CommInitRank;
  if (real == nullptr) return ncclSystemError;
  const ncclResult_t result = real(comm, nranks, commId, rank);
  Guarded([&](Interposer* ip) {
    ip->AfterCommInit(result, comm != nullptr ? *comm : nullptr, nranks, commId, rank, true);
  });
  return result;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  const auto real = Real().CommInitRankConfig;
  if (real == nullptr) return ncclSystemError;
  const ncclResult_t result = real(comm, nranks, commId, rank, config);
  Guarded([&](Interposer* ip) {
    ip->AfterCommInit(result, comm != nullptr ? *comm : nullptr, nranks, commId, rank,
                      ConfigBlocking(config));
  });
  return result;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  const auto real = Real().CommSplit;
  if (real == nullptr) return ncclSystemError;
  uint64_t split_index = 0;
  Guarded([&](Interposer* ip) { split_index = ip->BeforeCommSplit(comm); });
  const ncclResult_t result = real(comm, color, key, newcomm, config);
  Guarded([&](Interposer* ip) {
    ip->AfterCommSplit(result, comm, split_index, color, newcomm != nullptr ? *newcomm : nullptr,
                       ConfigBlocking(config));
  });
  return result;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const auto real = Real().CommDestroy;
  if (real == nullptr) return ncclSystemError;
  Guarded([&](Interposer* ip) { ip->BeforeCommDestroy(comm); });
  return real(comm);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const auto real = Real().AllReduce;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_ALL_REDUCE, comm, stream, count * TypeSize(datatype), -1, false,
            [&] { return real(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const auto real = Real().AllGather;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_ALL_GATHER, comm, stream, sendcount * TypeSize(datatype), -1, false,
            [&] { return real(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const auto real = Real().ReduceScatter;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_REDUCE_SCATTER, comm, stream, recvcount * TypeSize(datatype), -1,
            /*scale=*/true,
            [&] { return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const auto real = Real().Broadcast;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_BROADCAST, comm, stream, count * TypeSize(datatype), -1, false,
            [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const auto real = Real().Reduce;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_REDUCE, comm, stream, count * TypeSize(datatype), -1, false,
            [&] { return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const auto real = Real().Send;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_SEND, comm, stream, count * TypeSize(datatype), peer, false,
            [&] { return real(sendbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  const auto real = Real().Recv;
  if (real == nullptr) return ncclSystemError;
  return Op(FALCON_SHIM_OP_RECV, comm, stream, count * TypeSize(datatype), peer, false,
            [&] { return real(recvbuff, count, datatype, peer, comm, stream); });
}

ncclResult_t ncclGroupStart() {
  const auto real = Real().GroupStart;
  if (real == nullptr) return ncclSystemError;
  Guarded([](Interposer* ip) { ip->BeforeGroupStart(); });
  const ncclResult_t result = real();
  Guarded([&](Interposer* ip) { ip->AfterGroupStart(result); });
  return result;
}

ncclResult_t ncclGroupEnd() {
  const auto real = Real().GroupEnd;
  if (real == nullptr) return ncclSystemError;
  const ncclResult_t result = real();
  Guarded([&](Interposer* ip) { ip->AfterGroupEnd(result); });
  return result;
}

}  // extern "C"
