// The NCCL functions the interposer forwards to, found at run time: dlsym(RTLD_NEXT) first, then
// an already-loaded libnccl (dlopen RTLD_NOLOAD), for hosts such as Python that load NCCL into a
// local scope RTLD_NEXT cannot see. Never links libnccl. Resolved once, thread-safe.
#ifndef FALCON_TRAINER_SHIM_NCCL_REAL_NCCL_H_
#define FALCON_TRAINER_SHIM_NCCL_REAL_NCCL_H_

#include <nccl.h>

namespace falcon::trainer_shim::nccl {

struct RealNccl {
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommSplit) CommSplit = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  // Not wrapped; used to learn about communicators.
  decltype(&::ncclCommUserRank) CommUserRank = nullptr;
  decltype(&::ncclCommCount) CommCount = nullptr;
  decltype(&::ncclCommCuDevice) CommCuDevice = nullptr;
};

// The process's real NCCL. A missing function stays null: its wrapper returns ncclSystemError.
const RealNccl& Real();

}  // namespace falcon::trainer_shim::nccl

#endif  // FALCON_TRAINER_SHIM_NCCL_REAL_NCCL_H_
