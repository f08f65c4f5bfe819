// The production ClusterFactory: falcon::tests::harness::LocalCluster
// (//tests/harness:local_cluster) on loopback, with the binaries bazel built next to this one.
#ifndef FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_
#define FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "deploy/demo/runner.h"
#include "tests/harness/local_cluster.h"

namespace falcon::deploy::demo {

ClusterFactory LocalClusterFactory();

// The LocalCluster options LocalClusterFactory starts `spec` with (the trainer flags the cluster
// sets itself, --dp --pp --nodes --job, dropped; a given work_dir kept after Stop).
tests::harness::LocalClusterOptions LocalClusterOptionsFor(const ClusterSpec& spec);

// A Cluster over a running netns LocalCluster the caller owns (and stops, after the returned
// object's Stop or destruction), with the kernel fault driver (chaos::Driver) started on it: for
// tests that drive their own LocalCluster and apply faults from outside the job with
// KernelFaultThread (kernel_fault_thread.h). Stop removes every fault still applied and leaves
// the cluster running. Errors: kFailedPrecondition for a loopback cluster; the driver's.
absl::StatusOr<std::unique_ptr<Cluster>> AdoptLocalCluster(tests::harness::LocalCluster* cluster);

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_
