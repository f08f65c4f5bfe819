// CUDA implementation of device_memory.h (compiled only when CUDA is enabled).
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "collective/device_memory.h"

namespace falcon::collective {
namespace {

absl::Status CudaError(const char* what, cudaError_t err) {
  const std::string msg =
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  cudaGetLastError();  // Clear the sticky-free error state.
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::FailedPreconditionError(msg);
}

}  // namespace

bool DeviceSupportCompiledIn() { return true; }

absl::StatusOr<int> DeviceCount() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return CudaError("cudaGetDeviceCount", err);
  if (n == 0) return absl::FailedPreconditionError("no CUDA device");
  return n;
}

absl::StatusOr<void*> DeviceAlloc(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) return CudaError("cudaMalloc", err);
  return ptr;
}

void DeviceFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) return CudaError("cudaMemcpy H2D", err);
  return absl::OkStatus();
}

absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return CudaError("cudaMemcpy D2H", err);
  return absl::OkStatus();
}

}  // namespace falcon::collective
