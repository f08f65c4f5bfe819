// Applies a scenario's faults from outside the job (FaultInjection::kKernel) as the job reaches
// their windows: the runner's driver of Cluster::ApplyFault / RemoveFault, also used by e2e tests
// that run their own LocalCluster (local_cluster_runner.h's AdoptLocalCluster).
#ifndef FALCON_DEPLOY_DEMO_KERNEL_FAULT_THREAD_H_
#define FALCON_DEPLOY_DEMO_KERNEL_FAULT_THREAD_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "deploy/demo/fault_schedule.h"
#include "deploy/demo/runner.h"
#include "deploy/demo/scenario.h"

namespace falcon::deploy::demo {

// From its own thread, every 20 ms, reads the job's progress from the cluster's trainer JSON log
// (Cluster::TrainerJsonLog) and applies fault i through `cluster` once the job has finished
// iteration faults[i].from_iteration - 1, and removes it once it has finished to_iteration - 1
// (a fault starts within an iteration of where its window puts it). Records the iterations it
// really applied and removed each fault at (-1: not), and every error in words. `cluster` must
// outlive the thread (Finish or destruction).
class KernelFaultThread {
 public:
  // `hold_until_armed`: no fault is applied before DetectionArmed is called (FaultSchedule::
  // HoldUntilArmed; a held fault's window moves on, and applied() / removed() say where it ran).
  KernelFaultThread(Cluster* cluster, const std::vector<InjectedFault>& faults,
                    bool hold_until_armed = false);
  // The controller armed detection for the job at `iteration` (Job.detection_armed_iteration).
  // Thread-safe; the first call counts.
  void DetectionArmed(int64_t iteration);
  // Stops the thread and removes what is still applied (at the job's next iteration). Idempotent.
  void Finish();
  ~KernelFaultThread();

  KernelFaultThread(const KernelFaultThread&) = delete;
  KernelFaultThread& operator=(const KernelFaultThread&) = delete;

  // Per fault, the job iteration it was applied / removed at; -1 where it was not. Read after
  // Finish (the thread writes them).
  const std::vector<int64_t>& applied() const { return applied_; }
  const std::vector<int64_t>& removed() const { return removed_; }
  // "applying fault 0 (compute x1.5 on rank 5, ...): <error>", one per failure.
  const std::vector<std::string>& errors() const { return errors_; }
  // Per fault, the driver's error when applying it failed (or it was held and never armed);
  // empty otherwise.
  const std::vector<std::string>& apply_errors() const { return apply_errors_; }

 private:
  void Loop(const std::vector<InjectedFault>& faults);

  Cluster* cluster_;
  FaultSchedule schedule_;
  IterationTail tail_;
  std::vector<int64_t> applied_, removed_;
  std::vector<std::string> errors_;
  std::vector<std::string> apply_errors_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> armed_{-1};
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_KERNEL_FAULT_THREAD_H_
