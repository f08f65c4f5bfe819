#include "tests/gpu/spin_kernel.h"

namespace falcon::tests::gpu {
namespace {

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kSpinThreadsPerBlock) Spin(SpinState* state, uint64_t max_ns) {
  __shared__ volatile int stop;  // Re-read after each barrier.
  const uint64_t start = GlobalTimerNs();
  if (threadIdx.x == 0) {
    stop = 0;
    state->started[blockIdx.x] = 1;
    __threadfence_system();
  }
  __syncthreads();
  // Eight independent chains per thread keep the FMA pipe busy despite its latency.
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = 1.0f + 1e-3f * static_cast<float>(threadIdx.x + i);
  bool by_deadline = false;
  while (!stop) {
    for (int rep = 0; rep < 64; ++rep) {
#pragma unroll
      for (int i = 0; i < 8; ++i) x[i] = fmaf(x[i], 0.9999f, 1e-4f);
    }
    __syncthreads();  // Everyone has read `stop` before thread 0 may change it.
    if (threadIdx.x == 0) {
      if (state->stop) {
        stop = 1;
      } else if (GlobalTimerNs() - start > max_ns) {
        stop = 1;
        by_deadline = true;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && by_deadline) state->ended_by_deadline[blockIdx.x] = 1;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) s += x[i];
  if (s == 12345.0f) state->sink = 1;  // Never true; the compiler cannot know.
}

}  // namespace

cudaError_t LaunchSpin(SpinState* state, int blocks, uint64_t max_ns, cudaStream_t stream) {
  if (blocks < 1 || blocks > kMaxSpinBlocks) return cudaErrorInvalidValue;
  SpinState* device_state = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_state), state, 0);
  if (err != cudaSuccess) return err;
  // The most shared memory a block may have, so that each block holds an SM alone.
  int device = 0;
  int smem = 0;
  cudaFuncAttributes attributes{};
  err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, Spin);
  if (err != cudaSuccess) return err;
  smem -= static_cast<int>(attributes.sharedSizeBytes);  // Its static `stop` counts too.
  err = cudaFuncSetAttribute(Spin, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  Spin<<<blocks, kSpinThreadsPerBlock, static_cast<size_t>(smem), stream>>>(device_state, max_ns);
  return cudaGetLastError();
}

}  // namespace falcon::tests::gpu
