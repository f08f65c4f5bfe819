// Prints what this build and machine offer: the build variant, and with CUDA the runtime's device
// count (or the CUDA error that explains its absence) and NCCL's version. Exit 0 always: a
// machine without a GPU is a normal configuration, not an error.
#include <cstdio>

#ifdef FALCON_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

int main() {
#ifdef FALCON_HAVE_CUDA
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    std::printf("variant=cuda nccl_version=%d gpus=0 reason=%s (%s)\n", nccl_version,
                cudaGetErrorName(err), cudaGetErrorString(err));
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  std::printf("variant=cuda nccl_version=%d gpus=%d\n", nccl_version, devices);
#else
  std::printf("variant=nocuda gpus=0 reason=built without CUDA\n");
#endif
  return 0;
}
