// Settings of the NCCL interposer, read once from the environment of the training process.
//
//   FALCON_AGENT_SOCKET   agent unix socket. Unset: the interposer is a pure pass-through.
//   FALCON_NCCL_DISABLE   "1": pure pass-through.
//   FALCON_JOB            job name (default "falcon-job").
//   FALCON_RANK, else RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID: global rank.
//   FALCON_WORLD_SIZE, else WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS: world size.
//     Both unknown: taken from the first communicator created (normally the world).
//   FALCON_LOCAL_RANK, else LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID (default 0).
//   FALCON_EPOCH          starting epoch (default 0).
//   FALCON_PROFILING      "1": time ops with CUDA events from the start (the agent may change it).
//   FALCON_NCCL_MEMBERSHIP "0": do not all-gather global ranks over new communicators (use this
//                         when some ranks run without the interposer: the exchange would hang).
//   FALCON_NCCL_EVENT_POOL CUDA event pairs for device timing (default 1024).
//   FALCON_SHIM_EXIT_FLUSH_MS how long exit waits for the agent to ack (default 1000).
//   FALCON_NCCL_OP_TIMING  who sends the op records of communicators NCCL's profiler plugin
//                         (libnccl-profiler-falcon.so) is bound to: "interposer" (default) or
//                         "plugin" (the plugin times them from NCCL's own events; the interposer
//                         then records none for them). Read by both libraries.
#ifndef FALCON_TRAINER_SHIM_NCCL_INTERPOSER_CONFIG_H_
#define FALCON_TRAINER_SHIM_NCCL_INTERPOSER_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>

namespace falcon::trainer_shim::nccl {

// FALCON_NCCL_OP_TIMING.
enum class OpTiming { kInterposer, kPlugin };

// "plugin" (any case) -> kPlugin; unset or anything else -> kInterposer.
OpTiming OpTimingFromEnv(const std::function<const char*(const char*)>& getenv);

struct InterposerConfig {
  bool enabled = false;
  std::string agent_socket;
  std::string job = "falcon-job";
  int64_t rank = -1;        // -1: unknown.
  int64_t world_size = -1;  // -1: unknown.
  uint32_t local_rank = 0;
  uint64_t epoch = 0;
  bool profiling = false;
  bool exchange_membership = true;
  uint32_t event_pool = 1024;
  uint32_t exit_flush_ms = 1000;
  OpTiming op_timing = OpTiming::kInterposer;
};

// `getenv` returns the value or null. Malformed numbers are ignored (the default stays).
InterposerConfig ConfigFromEnv(const std::function<const char*(const char*)>& getenv);

}  // namespace falcon::trainer_shim::nccl

#endif  // FALCON_TRAINER_SHIM_NCCL_INTERPOSER_CONFIG_H_
