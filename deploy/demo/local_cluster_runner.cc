#include "deploy/demo/local_cluster_runner.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chaos/driver.h"
#include "chaos/fault_spec.h"
#include "chaos/record.h"
#include "chaos/runner.h"
#include "common/clock.h"
#include "glog/logging.h"
#include "tests/harness/local_cluster.h"

namespace falcon::deploy::demo {
namespace {

class LocalClusterAdapter : public Cluster {
 public:
  // Owns `cluster`: Stop stops it.
  explicit LocalClusterAdapter(std::unique_ptr<tests::harness::LocalCluster> cluster)
      : owned_(std::move(cluster)), cluster_(owned_.get()), stub_(cluster_->NewControlStub()) {}
  // Borrows `cluster`: Stop removes the faults only; the owner stops it.
  explicit LocalClusterAdapter(tests::harness::LocalCluster* cluster)
      : cluster_(cluster), stub_(cluster_->NewControlStub()) {}

  // Starts the kernel fault driver on the cluster (netns clusters).
  absl::Status StartFaultDriver() {
    runner_ = chaos::NewRealRunner();
    chaos::DriverOptions o;
    o.rank_table_path = cluster_->rank_table_path();
    o.record_path = cluster_->work_dir() + "/ground_truth.json";
    absl::StatusOr<std::unique_ptr<chaos::Driver>> driver =
        chaos::Driver::Create(cluster_->cluster_spec(), o, runner_.get(), &clock_);
    if (!driver.ok()) return driver.status();
    driver_ = *std::move(driver);
    return absl::OkStatus();
  }

  bool InjectsFaults() override { return driver_ != nullptr; }

  absl::Status ApplyFault(int index, const InjectedFault& fault, int64_t iteration) override {
    if (driver_ == nullptr) return Cluster::ApplyFault(index, fault, iteration);
    absl::StatusOr<chaos::FaultSpec> spec =
        chaos::ParseFaultSpec(fault.ToSpec(), chaos::OnlineCpus());
    if (!spec.ok()) return spec.status();
    absl::StatusOr<int> id = driver_->Apply(*spec, iteration);
    if (!id.ok()) return id.status();
    ids_[index] = *id;
    return absl::OkStatus();
  }

  absl::Status RemoveFault(int index, int64_t iteration) override {
    if (driver_ == nullptr) return Cluster::RemoveFault(index, iteration);
    auto it = ids_.find(index);
    if (it == ids_.end())
      return absl::NotFoundError(absl::StrCat("fault ", index, " was never applied"));
    return driver_->Remove(it->second, iteration);
  }

  std::string TrainerJsonLog() override { return cluster_->trainer_json_log(); }

  std::string FaultRecordJson() override {
    return driver_ == nullptr ? "" : chaos::RecordToJson(driver_->record());
  }

  falcon::v1::Control::StubInterface* control() override { return stub_.get(); }

  absl::Status RestartController() override {
    absl::Status s = cluster_->RestartController();
    stub_ = cluster_->NewControlStub();
    return s;
  }

  bool TrainerExited() override { return !cluster_->TrainerRunning(); }

  void Stop() override {
    if (driver_ != nullptr) {
      // Nothing of a fault outlives the run (the driver logs what it cannot remove).
      if (absl::Status s = driver_->RemoveAll(); !s.ok()) LOG(WARNING) << "fault driver: " << s;
    }
    if (owned_ != nullptr) owned_->Stop();
  }

 private:
  common::RealClock clock_;
  std::unique_ptr<chaos::Runner> runner_;
  std::unique_ptr<chaos::Driver> driver_;
  std::map<int, int> ids_;                               // Scenario fault index -> driver fault id.
  std::unique_ptr<tests::harness::LocalCluster> owned_;  // Null when borrowed.
  tests::harness::LocalCluster* cluster_;
  std::unique_ptr<falcon::v1::Control::Stub> stub_;
};

}  // namespace

tests::harness::LocalClusterOptions LocalClusterOptionsFor(const ClusterSpec& spec) {
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
  options.make_netns = spec.netns;
  if (!spec.work_dir.empty()) {
    options.work_dir = spec.work_dir;
    options.keep_work_dir = true;
  }
  return options;
}

ClusterFactory LocalClusterFactory() {
  return [](const ClusterSpec& spec) -> absl::StatusOr<std::unique_ptr<Cluster>> {
    tests::harness::LocalClusterOptions options = LocalClusterOptionsFor(spec);
    absl::StatusOr<std::unique_ptr<tests::harness::LocalCluster>> cluster =
        tests::harness::LocalCluster::Start(std::move(options));
    if (!cluster.ok()) return cluster.status();
    auto adapter = std::make_unique<LocalClusterAdapter>(*std::move(cluster));
    if (spec.netns) {
      if (absl::Status s = adapter->StartFaultDriver(); !s.ok()) {
        adapter->Stop();
        return s;
      }
    }
    return std::unique_ptr<Cluster>(std::move(adapter));
  };
}

absl::StatusOr<std::unique_ptr<Cluster>> AdoptLocalCluster(tests::harness::LocalCluster* cluster) {
  if (!cluster->options().make_netns) {
    return absl::FailedPreconditionError(
        "kernel faults need a netns cluster (LocalClusterOptions.make_netns)");
  }
  auto adapter = std::make_unique<LocalClusterAdapter>(cluster);
  if (absl::Status s = adapter->StartFaultDriver(); !s.ok()) return s;
  return std::unique_ptr<Cluster>(std::move(adapter));
}

}  // namespace falcon::deploy::demo
