// A competing kernel for the induced-slowdown check of `./falcon gpu-check` (tests/gpu/README.md):
// blocks running FP32 FMA chains until the host raises a stop flag or a GPU-clock deadline
// passes, each holding a whole SM: it asks for the most shared memory a block may have, so no
// other block (the GEMM's) fits beside it. With one block on each of half the SMs, the GEMM runs
// on the other half: a GPU at about half its speed, in every run, as a fail-slow GPU is.
// (Sharing every SM instead depends on the GEMM's blocks fitting beside the spinner's: cuBLAS's
// SGEMM blocks on an H200 take most of an SM's shared memory, and did not.)
// Compiled by nvcc (spin_kernel.cu, via cuda_object); the header is plain C++.
#ifndef FALCON_TESTS_GPU_SPIN_KERNEL_H_
#define FALCON_TESTS_GPU_SPIN_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace falcon::tests::gpu {

// Shared with the kernel through mapped pinned host memory (cudaHostAllocMapped), so the host
// reads it while the kernel runs.
// Per-block flags are plain stores (no atomics on host memory).
constexpr int kMaxSpinBlocks = 1024;
struct SpinState {
  volatile int32_t stop;                               // Host sets 1: every block ends.
  volatile int32_t sink;                               // Keeps the FMA results observable.
  volatile int32_t started[kMaxSpinBlocks];            // 1: the block has begun spinning.
  volatile int32_t ended_by_deadline[kMaxSpinBlocks];  // 1: it hit the deadline, not the flag.
};

constexpr int kSpinThreadsPerBlock = 256;

// Enqueues the spinner on `stream`: `blocks` (<= kMaxSpinBlocks) blocks of kSpinThreadsPerBlock
// threads, each with the device's largest opt-in shared memory per block (one block per SM);
// each stops at state->stop or after `max_ns` of GPU time. `state` is the host pointer of a
// mapped allocation.
cudaError_t LaunchSpin(SpinState* state, int blocks, uint64_t max_ns, cudaStream_t stream);

}  // namespace falcon::tests::gpu

#endif  // FALCON_TESTS_GPU_SPIN_KERNEL_H_
