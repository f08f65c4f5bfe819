// An e2e test's own cluster on the netns cluster, set up as falcon_demo sets up its runs
// (deploy/demo/runner.h: TrainArgs, RunOptions' controller flags, DemoSettings, a warm-up with
// detection off), with faults applied from outside the job by the kernel fault driver
// (deploy/demo/kernel_fault_thread.h): for tests that drive and inspect the run themselves
// (directives, logs, a controller restart at a chosen moment) rather than through the demo's
// report. DP=4 x PP=2 on 4 nodes. Needs root with CAP_NET_ADMIN (cluster::CheckNetnsSupport);
// tests that use it need tags = ["no-sandbox"].
#ifndef FALCON_TESTS_E2E_KERNEL_CLUSTER_H_
#define FALCON_TESTS_E2E_KERNEL_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deploy/demo/kernel_fault_thread.h"
#include "deploy/demo/runner.h"
#include "deploy/demo/scenario.h"
#include "proto/falcon/v1/control.pb.h"
#include "tests/harness/local_cluster.h"

namespace falcon::tests::e2e {

struct KernelClusterOptions {
  std::string job;
  // Applied and removed by the kernel fault driver when the job reaches their windows
  // ([from_iteration, to_iteration)); `injection` is set to kKernel here.
  std::vector<deploy::demo::InjectedFault> faults;
  // Over deploy::demo::DemoSettings(), as the defaults for new jobs (fields set here win).
  falcon::v1::Settings settings;
  bool tls = false;        // LocalClusterOptions::tls.
  bool mitigation = true;  // false: falcon_controller --mitigation=false.
  int64_t steps = 5000;    // The trainer's --steps (a test stops the cluster when it is done).
  // Detection stays off until the job finished this iteration, as in the demo (a fresh job's
  // first iterations are noisy); faults should start later.
  int64_t warmup_iterations = 30;
};

// A compute fault of x`factor` on `rank` over job iterations [from, to) (to: never, by default).
deploy::demo::InjectedFault ComputeFault(int rank, double factor, int64_t from,
                                         int64_t to = INT64_MAX / 2);

class KernelCluster {
 public:
  // Starts the cluster, sets the settings (detection off), starts the trainer and the fault
  // thread, and returns once the warm-up is over, detection is on and armed (the faults wait for
  // that: FaultSchedule::HoldUntilArmed; a fault due earlier starts armed + kArmedMargin and
  // keeps its length). Errors: LocalCluster's Start / StartTrainer, SetSettings', the fault
  // driver's (AdoptLocalCluster), kDeadlineExceeded when the job does not finish its warm-up, or
  // is not armed, within 3 minutes.
  static absl::StatusOr<std::unique_ptr<KernelCluster>> Start(KernelClusterOptions options);
  // Removes the faults still applied, then stops the cluster.
  ~KernelCluster();

  harness::LocalCluster& cluster() { return *cluster_; }

 private:
  KernelCluster() = default;
  // The job as the controller reports it (GetJob); nullopt when the call fails or the job is
  // unknown.
  std::optional<falcon::v1::Job> GetJob();
  // The job's last finished iteration; -1 when GetJob has none.
  int64_t LastIteration();
  // The iteration detection was armed at (Job.detection_armed_iteration); nullopt before.
  std::optional<int64_t> DetectionArmedIteration();
  std::unique_ptr<harness::LocalCluster> cluster_;
  std::unique_ptr<deploy::demo::Cluster> adopted_;
  std::unique_ptr<deploy::demo::KernelFaultThread> faults_;
  std::string job_;
};

}  // namespace falcon::tests::e2e

#endif  // FALCON_TESTS_E2E_KERNEL_CLUSTER_H_
