#include "trainer_shim/nccl/real_nccl.h"

#include <dlfcn.h>

#include <initializer_list>

namespace falcon::trainer_shim::nccl {
namespace {

// Any address inside this library, to recognize (and refuse) our own wrappers.
int g_self_marker;

bool IsSelf(void* fn) {
  Dl_info fn_info, self_info;
  if (dladdr(fn, &fn_info) == 0 || dladdr(&g_self_marker, &self_info) == 0) return false;
  return fn_info.dli_fbase == self_info.dli_fbase;
}

template <typename F>
void Resolve(const char* name, F* out) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr || IsSelf(fn)) {
    fn = nullptr;
    for (const char* lib : {"libnccl.so.2", "libnccl.so"}) {
      void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      void* candidate = dlsym(handle, name);
      dlclose(handle);  // Drops only the reference RTLD_NOLOAD added.
      if (candidate != nullptr && !IsSelf(candidate)) {
        fn = candidate;
        break;
      }
    }
  }
  *out = reinterpret_cast<F>(fn);
}

RealNccl ResolveAll() {
  RealNccl r;
  Resolve("ncclCommInitRank", &r.CommInitRank);
  Resolve("ncclCommInitRankConfig", &r.CommInitRankConfig);
  Resolve("ncclCommSplit", &r.CommSplit);
  Resolve("ncclCommDestroy", &r.CommDestroy);
  Resolve("ncclAllReduce", &r.AllReduce);
  Resolve("ncclAllGather", &r.AllGather);
  Resolve("ncclReduceScatter", &r.ReduceScatter);
  Resolve("ncclBroadcast", &r.Broadcast);
  Resolve("ncclReduce", &r.Reduce);
  Resolve("ncclSend", &r.Send);
  Resolve("ncclRecv", &r.Recv);
  Resolve("ncclGroupStart", &r.GroupStart);
  Resolve("ncclGroupEnd", &r.GroupEnd);
  Resolve("ncclCommUserRank", &r.CommUserRank);
  Resolve("ncclCommCount", &r.CommCount);
  Resolve("ncclCommCuDevice", &r.CommCuDevice);
  return r;
}

}  // namespace

const RealNccl& Real() {
  static const RealNccl real = ResolveAll();
  return real;
}

}  // namespace falcon::trainer_shim::nccl
