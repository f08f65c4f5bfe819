// A competing kernel for the induced-slowdown check of `./falcon gpu-check` (tests/gpu/README.md):
// one block per SM, each running dependent FP32 FMA chains (the pipe an FP32 SGEMM is bound by)
// until the host raises a stop flag or a GPU-clock deadline passes. Its blocks are small (256
// threads, no shared memory), so a GEMM's blocks fit beside them on every SM and share its issue
// slots: the GEMM slows down for as long as the spinner runs, in every run, not only in some.
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
// threads; each stops at state->stop or after `max_ns` of GPU time. `state` is the host pointer of
// a mapped allocation.
cudaError_t LaunchSpin(SpinState* state, int blocks, uint64_t max_ns, cudaStream_t stream);

}  // namespace falcon::tests::gpu

#endif  // FALCON_TESTS_GPU_SPIN_KERNEL_H_
