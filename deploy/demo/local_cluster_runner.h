// The production ClusterFactory: falcon::tests::harness::LocalCluster
// (//tests/harness:local_cluster) on loopback, with the binaries bazel built next to this one.
#ifndef FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_
#define FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_

#include "deploy/demo/runner.h"

namespace falcon::deploy::demo {

ClusterFactory LocalClusterFactory();

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_LOCAL_CLUSTER_RUNNER_H_
