// The CUDA runtime functions the interposer uses for device timing and the membership exchange,
// found at run time in the process (dlsym RTLD_DEFAULT, then an already-loaded libcudart). Never
// links or loads libcudart, so a process without CUDA, or with a static cudart, simply gets no
// device timing. Resolved once, thread-safe.
#ifndef FALCON_TRAINER_SHIM_NCCL_CUDA_API_H_
#define FALCON_TRAINER_SHIM_NCCL_CUDA_API_H_

#include <cuda_runtime_api.h>

namespace falcon::trainer_shim::nccl {

struct CudaApi {
  cudaError_t (*EventCreateWithFlags)(cudaEvent_t*, unsigned int) = nullptr;
  cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*EventQuery)(cudaEvent_t) = nullptr;
  cudaError_t (*EventSynchronize)(cudaEvent_t) = nullptr;
  cudaError_t (*EventElapsedTime)(float*, cudaEvent_t, cudaEvent_t) = nullptr;
  cudaError_t (*EventDestroy)(cudaEvent_t) = nullptr;
  cudaError_t (*GetDevice)(int*) = nullptr;
  cudaError_t (*SetDevice)(int) = nullptr;
  cudaError_t (*Malloc)(void**, size_t) = nullptr;
  cudaError_t (*Free)(void*) = nullptr;
  cudaError_t (*Memcpy)(void*, const void*, size_t, cudaMemcpyKind) = nullptr;
  cudaError_t (*StreamSynchronize)(cudaStream_t) = nullptr;
  cudaError_t (*GetLastError)() = nullptr;

  bool timing_ok() const {
    return EventCreateWithFlags && EventRecord && EventQuery && EventSynchronize &&
           EventElapsedTime && EventDestroy && GetDevice && GetLastError;
  }
  bool exchange_ok() const {
    return GetDevice && SetDevice && Malloc && Free && Memcpy && StreamSynchronize && GetLastError;
  }
};

const CudaApi& Cuda();

}  // namespace falcon::trainer_shim::nccl

#endif  // FALCON_TRAINER_SHIM_NCCL_CUDA_API_H_
