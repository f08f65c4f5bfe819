#include "tests/e2e/kernel_cluster.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "deploy/demo/local_cluster_runner.h"
#include "grpcpp/client_context.h"

namespace falcon::tests::e2e {

deploy::demo::InjectedFault ComputeFault(int rank, double factor, int64_t from, int64_t to) {
  deploy::demo::InjectedFault f;
  f.kind = deploy::demo::FaultKind::kCompute;
  f.rank = rank;
  f.factor = factor;
  f.from_iteration = from;
  f.to_iteration = to;
  f.injection = deploy::demo::FaultInjection::kKernel;
  f.expected_cause = "COMPUTE";
  return f;
}

absl::StatusOr<std::unique_ptr<KernelCluster>> KernelCluster::Start(KernelClusterOptions options) {
  deploy::demo::RunOptions run;
  run.job = options.job;
  run.scenario.name = options.job;
  run.scenario.layout = deploy::demo::Layout{4, 2};
  run.scenario.nodes = 4;
  run.scenario.iterations = options.steps;
  run.scenario.injection = deploy::demo::FaultInjection::kKernel;
  for (deploy::demo::InjectedFault f : options.faults) {
    f.injection = deploy::demo::FaultInjection::kKernel;
    run.scenario.faults.push_back(f);
  }
  run.emulated_compute_ms = 3;  // As the demo.
  harness::LocalClusterOptions o =
      deploy::demo::LocalClusterOptionsFor(deploy::demo::ClusterSpecFor(run));
  o.tls = options.tls;
  o.start_trainer = false;
  if (!options.mitigation) o.controller_args.push_back("--mitigation=false");

  std::unique_ptr<KernelCluster> kc(new KernelCluster());
  kc->job_ = options.job;
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> cluster =
      harness::LocalCluster::Start(std::move(o));
  if (!cluster.ok()) return cluster.status();
  kc->cluster_ = *std::move(cluster);

  falcon::v1::Settings defaults = deploy::demo::DemoSettings();
  defaults.MergeFrom(options.settings);
  defaults.set_detection_enabled(options.warmup_iterations <= 0);
  if (absl::Status s = kc->cluster_->SetSettings(defaults); !s.ok()) return s;
  if (absl::Status s = kc->cluster_->StartTrainer(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<deploy::demo::Cluster>> adopted =
      deploy::demo::AdoptLocalCluster(kc->cluster_.get());
  if (!adopted.ok()) return adopted.status();
  kc->adopted_ = *std::move(adopted);
  // The faults wait for detection to be armed, as the demo's (FaultSchedule::HoldUntilArmed).
  kc->faults_ = std::make_unique<deploy::demo::KernelFaultThread>(
      kc->adopted_.get(), run.scenario.faults, /*hold_until_armed=*/true);
  if (options.warmup_iterations > 0) {
    const absl::Time deadline = absl::Now() + absl::Minutes(3);
    while (kc->LastIteration() < options.warmup_iterations) {
      if (absl::Now() > deadline || !kc->cluster_->TrainerRunning()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "job ", options.job, " did not finish its warm-up (", options.warmup_iterations,
            " iterations) within 3 minutes; at iteration ", kc->LastIteration()));
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    falcon::v1::Settings on;
    on.set_detection_enabled(true);
    if (absl::Status s = kc->cluster_->SetSettings(on); !s.ok()) return s;
  }
  // Until the controller says detection is armed (the detectors' warm-up is over): then the
  // faults may start.
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  for (;;) {
    if (std::optional<int64_t> armed = kc->DetectionArmedIteration(); armed.has_value()) {
      kc->faults_->DetectionArmed(*armed);
      break;
    }
    if (absl::Now() > deadline || !kc->cluster_->TrainerRunning()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "job ", options.job, " was not armed for detection within 3 minutes (at iteration ",
          kc->LastIteration(), "): its faults would never start"));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return kc;
}

KernelCluster::~KernelCluster() {
  if (faults_ != nullptr) faults_->Finish();
  if (adopted_ != nullptr) adopted_->Stop();
  if (cluster_ != nullptr) cluster_->Stop();
}

std::optional<falcon::v1::Job> KernelCluster::GetJob() {
  auto stub = cluster_->NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::GetJobRequest req;
  req.set_job(job_);
  falcon::v1::Job job;
  if (!stub->GetJob(&ctx, req, &job).ok()) return std::nullopt;
  return job;
}

int64_t KernelCluster::LastIteration() {
  const std::optional<falcon::v1::Job> job = GetJob();
  return job.has_value() ? job->last_iteration() : -1;
}

std::optional<int64_t> KernelCluster::DetectionArmedIteration() {
  const std::optional<falcon::v1::Job> job = GetJob();
  if (!job.has_value() || !job->has_detection_armed_iteration()) return std::nullopt;
  return job->detection_armed_iteration();
}

}  // namespace falcon::tests::e2e
