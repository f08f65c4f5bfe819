// CPU contention against one rank (fault kind "contention", fault_spec.h): while a fault's window
// holds, `workers` stress-ng CPU stressors run pinned to the fault's CPUs (default: the rank's
// own CPU affinity, so pin ranks with `falcon_launch --pin_cpus` to slow one rank only). This is a
// real compute fail-slow: the rank's threads compete with the stressors for the CPU.
//
// Each stress-ng runs in its own process group and dies with the rank (PR_SET_PDEATHSIG).
// Not thread-safe: call from the rank's training loop.
#ifndef FALCON_COLLECTIVE_FAULT_CONTENTION_H_
#define FALCON_COLLECTIVE_FAULT_CONTENTION_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collective/fault/fault_spec.h"
#include "common/subprocess.h"

namespace falcon::collective::fault {

struct ContentionOptions {
  // stress-ng binary (Debian package stress-ng).
  std::string stress_ng_path = "/usr/bin/stress-ng";
};

class ContentionController {
 public:
  // Keeps the contention faults of global rank `rank`.
  ContentionController(const std::vector<ContentionFault>& faults, int rank,
                       ContentionOptions options = {});
  ~ContentionController();  // Stops every running stressor.
  ContentionController(const ContentionController&) = delete;
  ContentionController& operator=(const ContentionController&) = delete;

  // Starts the stressors of faults whose window contains `iteration` and stops those whose window
  // does not. kFailedPrecondition when stress-ng is missing, kInternal when it cannot start.
  absl::Status OnIteration(int64_t iteration);
  // Stops every running stressor (SIGTERM to its group, SIGKILL after 2 s) and reaps it.
  void StopAll();

  // Pids of running stress-ng processes (one per active fault).
  std::vector<pid_t> running_pids() const;
  bool has_faults() const { return !faults_.empty(); }

  // The CPUs a fault runs on: its own list, else this process's affinity. Exposed for tests.
  static std::vector<int> TargetCpus(const ContentionFault& fault);

 private:
  absl::Status Start(size_t index);
  void Stop(size_t index);

  std::vector<ContentionFault> faults_;
  std::vector<std::optional<common::Subprocess>> procs_;  // Parallel to faults_; set: running.
  ContentionOptions options_;
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_CONTENTION_H_
