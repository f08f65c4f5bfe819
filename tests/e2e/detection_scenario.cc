#include "tests/e2e/detection_scenario.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "tests/e2e/evidence.h"

namespace falcon::tests::e2e {
KernelClusterOptions DetectionScenario(const std::string& job) {
  KernelClusterOptions o;
  o.job = job;
  o.faults = {ComputeFault(5, 1.5, kDetectionFaultFrom)};
  o.mitigation = false;
  return o;
}

std::vector<falcon::v1::Event> ListEvents(harness::LocalCluster& cluster, const std::string& job) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListEventsRequest req;
  req.set_job(job);
  falcon::v1::ListEventsResponse resp;
  if (!stub->ListEvents(&ctx, req, &resp).ok()) return {};
  return {resp.events().begin(), resp.events().end()};
}

std::string DirectiveReasons(harness::LocalCluster& cluster, const std::string& job) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListDirectivesRequest req;
  req.set_job(job);
  falcon::v1::ListDirectivesResponse resp;
  if (!stub->ListDirectives(&ctx, req, &resp).ok()) return "(ListDirectives failed)";
  std::string out;
  for (const auto& d : resp.directives()) {
    absl::StrAppend(&out, "directive ", d.directive().directive_id(), " (",
                    falcon::v1::DirectiveRecord::State_Name(d.state()),
                    "): ", d.directive().reason(), "\n");
  }
  return out;
}

bool Localized(const falcon::v1::Event& e) {
  return e.state() >= falcon::v1::EVENT_STATE_LOCALIZED && e.verdict_iteration() >= 0;
}

std::string Describe(const std::vector<falcon::v1::Event>& events) {
  std::string out;
  for (const auto& e : events) absl::StrAppend(&out, e.DebugString(), "\n");
  return out.empty() ? "(no events)" : out;
}

int FalseAlarms(harness::LocalCluster& cluster, const std::string& job, int fault_from) {
  int n = 0;
  for (const auto& e : ListEvents(cluster, job)) n += e.onset_iteration() < fault_from - 5;
  return n;
}

bool AwaitEvent(harness::LocalCluster& cluster, const std::string& job,
                const std::function<bool(const falcon::v1::Event&)>& want, absl::Duration wait,
                falcon::v1::Event* found, std::vector<falcon::v1::Event>* last) {
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    *last = ListEvents(cluster, job);
    for (const auto& e : *last) {
      if (want(e)) {
        *found = e;
        return true;
      }
    }
    if (!cluster.TrainerRunning()) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  return false;
}

std::string MissingVerdictEvidence(harness::LocalCluster& cluster, const std::string& job,
                                   const std::vector<falcon::v1::Event>& last) {
  return absl::StrCat(Describe(last), JobEvidence(*cluster.NewControlStub(), job),
                      DirectiveReasons(cluster, job), "\ntrainer log:\n",
                      FileTail(cluster.log_path("trainer")), "\ncontroller log:\n",
                      FileTail(cluster.log_path("controller")));
}

void PrintFigures(const falcon::v1::Event& e, int fault_from, absl::Duration wall) {
  std::printf(
      "FIGURES cause=%s ranks=[%s] links=%d healthy_iteration_s=%.4f slow_iteration_s=%.4f "
      "fault_from=%d onset=%lld alarm=%lld verdict=%lld alarm_delay_iterations=%lld "
      "alarm_delay_s=%.2f verdict_delay_s=%.2f wall_until_verdict_s=%.1f\n",
      falcon::v1::Cause_Name(e.cause()).c_str(), absl::StrJoin(e.ranks(), ",").c_str(),
      e.links_size(), e.healthy_iteration_time_ns() * 1e-9, e.slow_iteration_time_ns() * 1e-9,
      fault_from, static_cast<long long>(e.onset_iteration()),
      static_cast<long long>(e.alarm_iteration()), static_cast<long long>(e.verdict_iteration()),
      static_cast<long long>(e.alarm_iteration() - e.onset_iteration()),
      (e.alarm_time_ns() - e.onset_time_ns()) * 1e-9,
      (e.verdict_time_ns() - e.alarm_time_ns()) * 1e-9, absl::ToDoubleSeconds(wall));
  std::fflush(stdout);
}

}  // namespace falcon::tests::e2e
