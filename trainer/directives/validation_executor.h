// Runs the validation benchmarks Falcon sends while a job is paused
// (docs/algorithms.md#validation-passes):
//   GemmTest      an m x k by k x n float GEMM with Eigen (the dense library training uses),
//                 `repeats` timed runs after one warm-up, the fastest run's time and FLOP/s
//                 reported (robust to scheduling noise on shared CPUs; a slow device slows every
//                 run). An active compute fault (collective/fault/compute_slowdown.h) stretches it
//                 exactly as it stretches training compute, so an emulated slow device is slow here
//                 too.
//   LinkPassTest  for each link (src, dst) of the pass: src sends `bytes` and waits for a 1-byte
//                 acknowledgement, `repeats` timed round trips after one warm-up; the sender
//                 reports the fastest. Links are walked in the listed order on every rank, so ranks
//                 in several links cannot deadlock. Link faults act in the transport, so a slow
//                 link is slow here too.
// A validation runs on its own communicator (all ranks, comm rank == global rank), never on the
// training communicators, so the shim may call Run() from its own thread while the pause gate
// holds the training thread inside an op; Run() bypasses the gate for its own ops.
//
// Thread-safe: Run() calls are serialized internally.
#ifndef FALCON_TRAINER_DIRECTIVES_VALIDATION_EXECUTOR_H_
#define FALCON_TRAINER_DIRECTIVES_VALIDATION_EXECUTOR_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"
#include "collective/fault/compute_slowdown.h"
#include "common/clock.h"
#include "proto/falcon/v1/common.pb.h"
#include "trainer/device/emulated_device.h"

namespace falcon::trainer::directives {

class ValidationExecutor {
 public:
  // `comm`: world-spanning validation communicator (comm rank == global rank). `runtime`: the
  // process's comm runtime (pause gate bypass, current iteration for fault windows). `slowdown`
  // may be null (no compute faults). All must outlive the executor.
  ValidationExecutor(collective::Communicator* comm, collective::CommRuntime* runtime,
                     const collective::fault::ComputeSlowdown* slowdown,
                     const common::Clock* clock);

  // Emulated device time added to each GEMM repetition, run on `device` (the rank's emulated
  // accelerator, trainer/device/emulated_device.h, so a rank the OS slows is slow here as in
  // training; an in-process test fault's factor stretches it too), matching the trainer's
  // --emulated_compute_ms, so GEMM validation sees an emulated slow device above the CPU noise.
  // Call before the first Run(); `device` must outlive the executor. Default: none.
  void SetEmulatedGemmTime(absl::Duration per_repeat, device::EmulatedDevice* device) {
    emulated_gemm_ = per_repeat;
    device_ = device;
  }
  // Emulated wire time added to each link-pass message (slept by the sender after the send), so
  // that on CPU ranks sharing a few cores the contention noise of loopback copies (which made
  // healthy links look 2x slower than their peers) is small next to the measured time; injected
  // link faults still add their delay and bandwidth cap on top. Call before the first Run().
  void SetEmulatedLinkTime(absl::Duration per_message) { emulated_link_ = per_message; }

  // Whether this rank takes part in `task`: it is listed in task.ranks or, for a link pass, is an
  // endpoint of one of its links.
  bool Participates(const falcon::v1::ValidationTask& task) const;

  // Runs `task` on this rank. Never fails as a call: a malformed task or a failed op gives a
  // result whose `error` names the field or the peer (and no timings).
  falcon::v1::ValidationResult Run(const falcon::v1::ValidationTask& task) ABSL_LOCKS_EXCLUDED(mu_);

  // Checks a task's fields against common.proto's ranges and the world size, and bounds its work
  // (GEMM: 1 GiB of matrices and 4e10 FLOP in all; link pass: 4 GiB per link in all) so a task
  // ends well inside the communicator timeout. kInvalidArgument naming the field.
  static absl::Status CheckTask(const falcon::v1::ValidationTask& task, int world_size);

 private:
  absl::Status RunGemm(const falcon::v1::GemmTest& test, falcon::v1::ValidationResult* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RunLinkPass(const falcon::v1::LinkPassTest& test,
                           falcon::v1::ValidationResult* result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  collective::Communicator* const comm_;
  collective::CommRuntime* const runtime_;
  const collective::fault::ComputeSlowdown* const slowdown_;
  const common::Clock* const clock_;
  absl::Mutex mu_;
  absl::Duration emulated_gemm_ = absl::ZeroDuration();
  device::EmulatedDevice* device_ = nullptr;
  absl::Duration emulated_link_ = absl::ZeroDuration();
};

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_VALIDATION_EXECUTOR_H_
