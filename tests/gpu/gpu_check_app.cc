// The GEMM checks of `./falcon gpu-check` (tests/gpu/gpu_check.sh, tests/gpu/README.md), one per
// subcommand, each printing one line of key=value figures that the script judges:
//
//   gpu_check_app gemm [--m=1000 --n=700 --k=300 --repeats=10]
//     cuBLAS SGEMM (GpuValidationGemm) of pseudo-random row-major inputs, each run timed with CUDA
//     events; the result compared with a CPU reference in double precision.
//     -> "gemm m= n= k= repeats= fastest_ms= tflops= max_rel_err=" where max_rel_err is the largest
//        |C - ref| / sum_l |A_il B_lj| over all elements.
//   gpu_check_app validation [--size=4096 --repeats=3]
//     The validation task GEMM (m = n = k = size) through RunGpuValidationGemm, the function a GPU
//     trainer's validation executor calls, then its product checked against the exact value.
//     -> "validation_gemm m= n= k= repeats= duration_ms= tflops= max_abs_err="
//   gpu_check_app slowdown [--size=4096 --repeats=3 --spin_max_s=10]
//     The validation GEMM timed alone, then again while a competing kernel (spin_kernel.h) holds
//     half the SMs of the same GPU from another stream.
//     -> "slowdown m= repeats= uncontended_ms= contended_ms= ratio= spinner_blocks=
//         spinner_started= spinner_deadline_blocks="
// Exit 0 when the figures were measured (judging them is the script's job), 2 on a CUDA/cuBLAS
// error or bad arguments (the error on stderr).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/gpu/spin_kernel.h"
#include "trainer/directives/gpu_validation_gemm.h"

ABSL_FLAG(int, m, 1000, "gemm: rows of A and C.");
ABSL_FLAG(int, n, 700, "gemm: columns of B and C.");
ABSL_FLAG(int, k, 300, "gemm: inner dimension.");
ABSL_FLAG(int, size, 4096, "validation, slowdown: m = n = k of the validation GEMM.");
ABSL_FLAG(int, repeats, 0, "Timed runs after one warm-up (0: 10 for gemm, 3 otherwise).");
ABSL_FLAG(double, spin_max_s, 10, "slowdown: the competing kernel's deadline (GPU seconds).");

namespace falcon::tests::gpu {
namespace {

using ::falcon::trainer::directives::GpuGemmTiming;
using ::falcon::trainer::directives::GpuValidationGemm;

absl::Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// Owns a non-blocking stream (no implicit synchronization with other streams).
class Stream {
 public:
  static absl::StatusOr<std::unique_ptr<Stream>> Create() {
    auto s = std::make_unique<Stream>();
    if (absl::Status st = Cuda(cudaStreamCreateWithFlags(&s->stream_, cudaStreamNonBlocking),
                               "cudaStreamCreateWithFlags");
        !st.ok()) {
      return st;
    }
    return s;
  }
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);  // Teardown: nothing to undo on error.
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

absl::Status Gemm(int m, int n, int k, int repeats) {
  absl::StatusOr<std::unique_ptr<Stream>> stream = Stream::Create();
  if (!stream.ok()) return stream.status();
  absl::StatusOr<std::unique_ptr<GpuValidationGemm>> gemm =
      GpuValidationGemm::Create(m, n, k, repeats, (*stream)->get());
  if (!gemm.ok()) return gemm.status();
  // Pseudo-random inputs in [-1, 1) from a fixed LCG, so a transposed or mis-strided product
  // cannot match by symmetry.
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1 << 23) - 1.0f;
  };
  std::vector<float> a(size_t{1} * m * k), b(size_t{1} * k * n);
  for (float& x : a) x = next();
  for (float& x : b) x = next();
  if (absl::Status s = (*gemm)->SetInputs(a, b); !s.ok()) return s;
  absl::StatusOr<GpuGemmTiming> timing = (*gemm)->Run(repeats);
  if (!timing.ok()) return timing.status();
  absl::StatusOr<std::vector<float>> c = (*gemm)->Result();
  if (!c.ok()) return c.status();
  double max_rel_err = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double ref = 0, scale = 0;
      for (int l = 0; l < k; ++l) {
        const double p = static_cast<double>(a[size_t{1} * i * k + l]) * b[size_t{1} * l * n + j];
        ref += p;
        scale += std::fabs(p);
      }
      const double got = (*c)[size_t{1} * i * n + j];
      // A NaN or infinity makes the error infinite (never hidden by std::max).
      const double err = std::isfinite(got) ? std::fabs(got - ref) / (scale + 1e-30) : INFINITY;
      max_rel_err = std::max(max_rel_err, err);
    }
  }
  std::printf("gemm m=%d n=%d k=%d repeats=%d fastest_ms=%.6f tflops=%.4f max_rel_err=%.3g\n", m, n,
              k, repeats, Ms(timing->fastest), timing->flops / 1e12, max_rel_err);
  return absl::OkStatus();
}

absl::Status Validation(int size, int repeats) {
  absl::StatusOr<std::unique_ptr<Stream>> stream = Stream::Create();
  if (!stream.ok()) return stream.status();
  falcon::v1::GemmTest test;
  test.set_m(size);
  test.set_n(size);
  test.set_k(size);
  test.set_repeats(repeats);
  falcon::v1::ValidationResult result;
  if (absl::Status s =
          ::falcon::trainer::directives::RunGpuValidationGemm(test, (*stream)->get(), &result);
      !s.ok()) {
    return s;
  }
  // The product itself, from the same inputs (see gpu_validation_gemm.h for its exact value).
  absl::StatusOr<std::unique_ptr<GpuValidationGemm>> gemm =
      GpuValidationGemm::Create(size, size, size, 1, (*stream)->get());
  if (!gemm.ok()) return gemm.status();
  if (absl::StatusOr<GpuGemmTiming> t = (*gemm)->Run(1); !t.ok()) return t.status();
  absl::StatusOr<std::vector<float>> c = (*gemm)->Result();
  if (!c.ok()) return c.status();
  const double want = 0.25 * (0.5 * size + 0.5);  // Every row i < min(m, k) = size.
  double max_abs_err = 0;
  for (float x : *c) {
    max_abs_err = std::max(max_abs_err, std::isfinite(x) ? std::fabs(x - want) : INFINITY);
  }
  std::printf(
      "validation_gemm m=%d n=%d k=%d repeats=%d duration_ms=%.6f tflops=%.4f max_abs_err=%.3g\n",
      size, size, size, repeats, result.gemm_duration_ns() / 1e6, result.gemm_flops() / 1e12,
      max_abs_err);
  return absl::OkStatus();
}

absl::Status Slowdown(int size, int repeats, double spin_max_s) {
  absl::StatusOr<std::unique_ptr<Stream>> gemm_stream = Stream::Create();
  if (!gemm_stream.ok()) return gemm_stream.status();
  absl::StatusOr<std::unique_ptr<Stream>> spin_stream = Stream::Create();
  if (!spin_stream.ok()) return spin_stream.status();
  absl::StatusOr<std::unique_ptr<GpuValidationGemm>> gemm =
      GpuValidationGemm::Create(size, size, size, repeats, (*gemm_stream)->get());
  if (!gemm.ok()) return gemm.status();
  // Alone first; this also makes cuBLAS allocate what it needs before the spinner runs.
  absl::StatusOr<GpuGemmTiming> alone = (*gemm)->Run(repeats);
  if (!alone.ok()) return alone.status();

  int device = 0, sms = 0;
  if (absl::Status s = Cuda(cudaGetDevice(&device), "cudaGetDevice"); !s.ok()) return s;
  if (absl::Status s = Cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                            "cudaDeviceGetAttribute(MultiProcessorCount)");
      !s.ok()) {
    return s;
  }
  // Half the SMs, each held whole by one spinner block (spin_kernel.h).
  const int blocks = std::max(1, std::min(sms / 2, kMaxSpinBlocks));
  SpinState* spin = nullptr;
  if (absl::Status s = Cuda(
          cudaHostAlloc(reinterpret_cast<void**>(&spin), sizeof(SpinState), cudaHostAllocMapped),
          "cudaHostAlloc(mapped)");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<SpinState, void (*)(SpinState*)> spin_owner(
      spin, [](SpinState* p) { cudaFreeHost(p); });
  spin->stop = 0;
  spin->sink = 0;
  for (int i = 0; i < kMaxSpinBlocks; ++i) {
    spin->started[i] = 0;
    spin->ended_by_deadline[i] = 0;
  }
  const uint64_t max_ns = static_cast<uint64_t>(spin_max_s * 1e9);
  if (absl::Status s = Cuda(LaunchSpin(spin, blocks, max_ns, (*spin_stream)->get()), "LaunchSpin");
      !s.ok()) {
    return s;
  }
  // Time the GEMM only once every spinner block runs (or after 2 s; the count is reported).
  auto started = [&] {
    int n = 0;
    for (int i = 0; i < blocks; ++i) n += spin->started[i];
    return n;
  };
  const absl::Time wait_end = absl::Now() + absl::Seconds(2);
  while (started() < blocks && absl::Now() < wait_end) absl::SleepFor(absl::Microseconds(100));
  const int spinning = started();
  absl::StatusOr<GpuGemmTiming> contended = (*gemm)->Run(repeats);
  spin->stop = 1;
  const absl::Status spin_done =
      Cuda(cudaStreamSynchronize((*spin_stream)->get()), "cudaStreamSynchronize(spinner)");
  if (!contended.ok()) return contended.status();
  if (!spin_done.ok()) return spin_done;
  int deadline_blocks = 0;
  for (int i = 0; i < blocks; ++i) deadline_blocks += spin->ended_by_deadline[i];
  const double ratio = Ms(contended->fastest) / std::max(1e-9, Ms(alone->fastest));
  std::printf(
      "slowdown m=%d repeats=%d uncontended_ms=%.6f contended_ms=%.6f ratio=%.3f "
      "spinner_blocks=%d spinner_started=%d spinner_deadline_blocks=%d\n",
      size, repeats, Ms(alone->fastest), Ms(contended->fastest), ratio, blocks, spinning,
      deadline_blocks);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() == 2 ? args[1] : "";
  const int repeats = absl::GetFlag(FLAGS_repeats);
  absl::Status status;
  if (cmd == "gemm") {
    status = Gemm(absl::GetFlag(FLAGS_m), absl::GetFlag(FLAGS_n), absl::GetFlag(FLAGS_k),
                  repeats > 0 ? repeats : 10);
  } else if (cmd == "validation") {
    status = Validation(absl::GetFlag(FLAGS_size), repeats > 0 ? repeats : 3);
  } else if (cmd == "slowdown") {
    status = Slowdown(absl::GetFlag(FLAGS_size), repeats > 0 ? repeats : 3,
                      absl::GetFlag(FLAGS_spin_max_s));
  } else {
    std::fprintf(stderr, "usage: gpu_check_app gemm|validation|slowdown [--flags]\n");
    return 2;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "gpu_check_app %s: %s\n", cmd.c_str(), status.ToString().c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace falcon::tests::gpu

int main(int argc, char** argv) { return falcon::tests::gpu::Main(argc, argv); }
