#include "trainer_shim/nccl/cuda_api.h"

#include <dlfcn.h>

#include <initializer_list>

namespace falcon::trainer_shim::nccl {
namespace {

template <typename F>
void Resolve(const char* name, F* out) {
  void* fn = dlsym(RTLD_DEFAULT, name);
  if (fn == nullptr) {
    for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
      void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      fn = dlsym(handle, name);
      dlclose(handle);
      if (fn != nullptr) break;
    }
  }
  *out = reinterpret_cast<F>(fn);
}

CudaApi ResolveAll() {
  CudaApi c;
  Resolve("cudaEventCreateWithFlags", &c.EventCreateWithFlags);
  Resolve("cudaEventRecord", &c.EventRecord);
  Resolve("cudaEventQuery", &c.EventQuery);
  Resolve("cudaEventSynchronize", &c.EventSynchronize);
  Resolve("cudaEventElapsedTime", &c.EventElapsedTime);
  Resolve("cudaEventDestroy", &c.EventDestroy);
  Resolve("cudaGetDevice", &c.GetDevice);
  Resolve("cudaSetDevice", &c.SetDevice);
  Resolve("cudaMalloc", &c.Malloc);
  Resolve("cudaFree", &c.Free);
  Resolve("cudaMemcpy", &c.Memcpy);
  Resolve("cudaStreamSynchronize", &c.StreamSynchronize);
  Resolve("cudaGetLastError", &c.GetLastError);
  return c;
}

}  // namespace

const CudaApi& Cuda() {
  static const CudaApi cuda = ResolveAll();
  return cuda;
}

}  // namespace falcon::trainer_shim::nccl
