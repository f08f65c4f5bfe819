#include "deploy/demo/local_cluster_runner.h"

#include <utility>

#include "absl/strings/match.h"
#include "tests/harness/local_cluster.h"

namespace falcon::deploy::demo {
namespace {

class LocalClusterAdapter : public Cluster {
 public:
  explicit LocalClusterAdapter(std::unique_ptr<tests::harness::LocalCluster> cluster)
      : cluster_(std::move(cluster)), stub_(cluster_->NewControlStub()) {}

  falcon::v1::Control::StubInterface* control() override { return stub_.get(); }

  absl::Status RestartController() override {
    absl::Status s = cluster_->RestartController();
    stub_ = cluster_->NewControlStub();
    return s;
  }

  bool TrainerExited() override { return !cluster_->TrainerRunning(); }

  void Stop() override { cluster_->Stop(); }

 private:
  std::unique_ptr<tests::harness::LocalCluster> cluster_;
  std::unique_ptr<falcon::v1::Control::Stub> stub_;
};

}  // namespace

ClusterFactory LocalClusterFactory() {
  return [](const ClusterSpec& spec) -> absl::StatusOr<std::unique_ptr<Cluster>> {
    tests::harness::LocalClusterOptions options;
    options.dp = spec.layout.dp;
    options.pp = spec.layout.pp;
    options.nodes = spec.nodes;
    options.job = spec.job;
    for (const std::string& a : spec.train_args) {
      // The cluster sets these itself.
      if (absl::StartsWith(a, "--dp=") || absl::StartsWith(a, "--pp=") ||
          absl::StartsWith(a, "--nodes=") || absl::StartsWith(a, "--job=")) {
        continue;
      }
      options.trainer_args.push_back(a);
    }
    options.controller_args = spec.controller_args;
    if (!spec.work_dir.empty()) {
      options.work_dir = spec.work_dir;
      options.keep_work_dir = true;
    }
    absl::StatusOr<std::unique_ptr<tests::harness::LocalCluster>> cluster =
        tests::harness::LocalCluster::Start(std::move(options));
    if (!cluster.ok()) return cluster.status();
    return std::unique_ptr<Cluster>(new LocalClusterAdapter(*std::move(cluster)));
  };
}

}  // namespace falcon::deploy::demo
