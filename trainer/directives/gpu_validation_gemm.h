// The validation GEMM (docs/algorithms.md#validation-passes) on a CUDA GPU: the GPU counterpart of
// ValidationExecutor's Eigen GEMM, for a trainer whose compute runs on a GPU. cuBLAS SGEMM (FP32,
// default math mode: no TF32) of the same row-major m x k by k x n product with the same inputs as
// the CPU executor (A = 0.5 with ones on the diagonal, B = 0.25), so every element of a row
// i < min(m, k) of C is 0.25 * (0.5 * k + 0.5) and every other is 0.125 * k, exact in FP32 for
// k <= 65536. Each run is timed on the GPU between two CUDA events on the caller's stream; the
// first run warms up (cuBLAS kernel selection, caches) and is not counted; the fastest of the
// timed runs is reported (a slow device slows every run; noise only inflates some).
//
// CUDA-only (the target exists in the CUDA variant only). Not thread-safe; one GEMM per thread.
#ifndef FALCON_TRAINER_DIRECTIVES_GPU_VALIDATION_GEMM_H_
#define FALCON_TRAINER_DIRECTIVES_GPU_VALIDATION_GEMM_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer::directives {

// Timings of one Run(): `runs` per-run GPU times (warm-up excluded), the fastest, and the FLOP/s
// (2 m n k / fastest) it gives.
struct GpuGemmTiming {
  std::vector<absl::Duration> runs;
  absl::Duration fastest;
  double flops = 0;
};

class GpuValidationGemm {
 public:
  // Allocates A, B and C on the current CUDA device, fills A and B with the validation inputs and
  // binds a cuBLAS handle to `stream` (nullptr: the legacy default stream), which must outlive
  // this object. `max_repeats` bounds Run()'s repeats (its CUDA events are created here, so that
  // Run() allocates nothing). kInvalidArgument naming the field for m, n, k outside [1, 65536] or
  // max_repeats outside [1, 100]; kInternal with the CUDA/cuBLAS error otherwise.
  static absl::StatusOr<std::unique_ptr<GpuValidationGemm>> Create(int m, int n, int k,
                                                                   int max_repeats,
                                                                   cudaStream_t stream);
  ~GpuValidationGemm();
  GpuValidationGemm(const GpuValidationGemm&) = delete;
  GpuValidationGemm& operator=(const GpuValidationGemm&) = delete;

  // Replaces the inputs: row-major `a` (m x k) and `b` (k x n). kInvalidArgument on a size
  // mismatch.
  absl::Status SetInputs(const std::vector<float>& a, const std::vector<float>& b);

  // One warm-up and `repeats` timed runs of C = A B, enqueued back to back on the stream, then
  // waits for them. kInvalidArgument for repeats outside [1, max_repeats]; kInternal with the
  // CUDA/cuBLAS error.
  absl::StatusOr<GpuGemmTiming> Run(int repeats);

  // C (m x n, row-major) as of the last Run().
  absl::StatusOr<std::vector<float>> Result() const;

  int m() const { return m_; }
  int n() const { return n_; }
  int k() const { return k_; }

 private:
  GpuValidationGemm(int m, int n, int k, cudaStream_t stream)
      : m_(m), n_(n), k_(k), stream_(stream) {}

  const int m_, n_, k_;
  cudaStream_t stream_;
  void* cublas_ = nullptr;  // cublasHandle_t; kept opaque so that this header needs no cuBLAS.
  float* a_ = nullptr;
  float* b_ = nullptr;
  float* c_ = nullptr;
  std::vector<cudaEvent_t> events_;  // max_repeats + 2
};

// Runs `test` like ValidationExecutor::RunGemm, on the current CUDA device and `stream`: sets
// result's gemm_duration_ns (the fastest run) and gemm_flops. Errors as above, the task's fields
// named as validation_task.gemm.*.
absl::Status RunGpuValidationGemm(const falcon::v1::GemmTest& test, cudaStream_t stream,
                                  falcon::v1::ValidationResult* result);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_GPU_VALIDATION_GEMM_H_
