#include "trainer/directives/gpu_validation_gemm.h"

#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace falcon::trainer::directives {
namespace {

constexpr int kMaxDim = 65536;
constexpr int kMaxRepeats = 100;

absl::Status CudaError(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

absl::Status CublasError(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cublasGetStatusName(st), " (", cublasGetStatusString(st), ")"));
}

absl::Status CheckRange(const char* field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", value, "; want [", lo, ", ", hi, "]"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuValidationGemm>> GpuValidationGemm::Create(int m, int n, int k,
                                                                             int max_repeats,
                                                                             cudaStream_t stream) {
  for (absl::Status s :
       {CheckRange("m", m, 1, kMaxDim), CheckRange("n", n, 1, kMaxDim),
        CheckRange("k", k, 1, kMaxDim), CheckRange("max_repeats", max_repeats, 1, kMaxRepeats)}) {
    if (!s.ok()) return s;
  }
  std::unique_ptr<GpuValidationGemm> g(new GpuValidationGemm(m, n, k, stream));
  const size_t mk = size_t{1} * m * k, kn = size_t{1} * k * n, mn = size_t{1} * m * n;
  if (absl::Status s = CudaError(cudaMalloc(reinterpret_cast<void**>(&g->a_), mk * sizeof(float)),
                                 "cudaMalloc(A)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaError(cudaMalloc(reinterpret_cast<void**>(&g->b_), kn * sizeof(float)),
                                 "cudaMalloc(B)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaError(cudaMalloc(reinterpret_cast<void**>(&g->c_), mn * sizeof(float)),
                                 "cudaMalloc(C)");
      !s.ok()) {
    return s;
  }
  cublasHandle_t handle = nullptr;
  if (absl::Status s = CublasError(cublasCreate(&handle), "cublasCreate"); !s.ok()) return s;
  g->cublas_ = handle;
  if (absl::Status s = CublasError(cublasSetStream(handle, stream), "cublasSetStream"); !s.ok()) {
    return s;
  }
  // FP32 throughout, as the CPU executor computes it (no TF32 tensor-core shortcut).
  if (absl::Status s =
          CublasError(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      !s.ok()) {
    return s;
  }
  g->events_.resize(max_repeats + 2, nullptr);
  for (cudaEvent_t& e : g->events_) {
    if (absl::Status s = CudaError(cudaEventCreate(&e), "cudaEventCreate"); !s.ok()) return s;
  }
  // The CPU executor's inputs (validation_executor.cc).
  std::vector<float> a(mk, 0.5f), b(kn, 0.25f);
  for (int i = 0; i < std::min(m, k); ++i) a[size_t{1} * i * k + i] = 1.0f;
  if (absl::Status s = g->SetInputs(a, b); !s.ok()) return s;
  return g;
}

GpuValidationGemm::~GpuValidationGemm() {
  // Teardown errors cannot be reported from a destructor and leave nothing to undo.
  for (cudaEvent_t e : events_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (cublas_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
  cudaFree(a_);
  cudaFree(b_);
  cudaFree(c_);
}

absl::Status GpuValidationGemm::SetInputs(const std::vector<float>& a,
                                          const std::vector<float>& b) {
  const size_t mk = size_t{1} * m_ * k_, kn = size_t{1} * k_ * n_;
  if (a.size() != mk || b.size() != kn) {
    return absl::InvalidArgumentError(absl::StrCat("inputs have ", a.size(), " and ", b.size(),
                                                   " elements; want m*k=", mk, " and k*n=", kn));
  }
  if (absl::Status s = CudaError(
          cudaMemcpyAsync(a_, a.data(), mk * sizeof(float), cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync(A)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaError(
          cudaMemcpyAsync(b_, b.data(), kn * sizeof(float), cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync(B)");
      !s.ok()) {
    return s;
  }
  return CudaError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::StatusOr<GpuGemmTiming> GpuValidationGemm::Run(int repeats) {
  if (absl::Status s = CheckRange("repeats", repeats, 1, static_cast<int>(events_.size()) - 2);
      !s.ok()) {
    return s;
  }
  auto handle = static_cast<cublasHandle_t>(cublas_);
  const float one = 1.0f, zero = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T: B^T is column-major n x k (ld n), A^T is
  // column-major k x m (ld k), C^T column-major n x m (ld n).
  for (int run = 0; run <= repeats; ++run) {
    if (absl::Status s = CudaError(cudaEventRecord(events_[run], stream_), "cudaEventRecord");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CublasError(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n_, m_, k_, &one,
                                                 b_, n_, a_, k_, &zero, c_, n_),
                                     "cublasSgemm");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CudaError(cudaEventRecord(events_[repeats + 1], stream_), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CudaError(cudaEventSynchronize(events_[repeats + 1]), "cudaEventSynchronize");
      !s.ok()) {
    return s;
  }
  GpuGemmTiming timing;
  for (int run = 1; run <= repeats; ++run) {  // Run 0 (events 0 -> 1) warms up.
    float ms = 0;
    if (absl::Status s = CudaError(cudaEventElapsedTime(&ms, events_[run], events_[run + 1]),
                                   "cudaEventElapsedTime");
        !s.ok()) {
      return s;
    }
    timing.runs.push_back(absl::Microseconds(static_cast<double>(ms) * 1e3));
  }
  timing.fastest = *std::min_element(timing.runs.begin(), timing.runs.end());
  const double seconds = absl::ToDoubleSeconds(timing.fastest);
  timing.flops = seconds > 0 ? 2.0 * m_ * n_ * k_ / seconds : 0;
  return timing;
}

absl::StatusOr<std::vector<float>> GpuValidationGemm::Result() const {
  std::vector<float> c(size_t{1} * m_ * n_);
  if (absl::Status s = CudaError(
          cudaMemcpyAsync(c.data(), c_, c.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync(C)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      !s.ok()) {
    return s;
  }
  return c;
}

absl::Status RunGpuValidationGemm(const falcon::v1::GemmTest& test, cudaStream_t stream,
                                  falcon::v1::ValidationResult* result) {
  for (absl::Status s :
       {CheckRange("validation_task.gemm.m", test.m(), 1, kMaxDim),
        CheckRange("validation_task.gemm.n", test.n(), 1, kMaxDim),
        CheckRange("validation_task.gemm.k", test.k(), 1, kMaxDim),
        CheckRange("validation_task.gemm.repeats", test.repeats(), 1, kMaxRepeats)}) {
    if (!s.ok()) return s;
  }
  const int repeats = static_cast<int>(test.repeats());
  absl::StatusOr<std::unique_ptr<GpuValidationGemm>> gemm =
      GpuValidationGemm::Create(static_cast<int>(test.m()), static_cast<int>(test.n()),
                                static_cast<int>(test.k()), repeats, stream);
  if (!gemm.ok()) return gemm.status();
  absl::StatusOr<GpuGemmTiming> timing = (*gemm)->Run(repeats);
  if (!timing.ok()) return timing.status();
  result->set_gemm_duration_ns(std::max<int64_t>(1, absl::ToInt64Nanoseconds(timing->fastest)));
  result->set_gemm_flops(timing->flops);
  return absl::OkStatus();
}

}  // namespace falcon::trainer::directives
