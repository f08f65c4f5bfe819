// Detection end to end on a real training run: LocalCluster (tests/harness) starts the controller,
// one agent per emulated node and the reference trainer (DP=4 x PP=2, 8 ranks, 4 emulated nodes,
// every rank on the real shim); a fault injected into the trainer must show up as a controller
// event with the right cause and culprit, reaching LOCALIZED. Mitigation is off when the
// controller has the flag, so the verdict is judged on its own.
//
// Figures (iteration time, alarm delay, verdict iteration, wall time) are printed for the report.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/e2e/evidence.h"
#include "tests/harness/local_cluster.h"

namespace falcon::tests::e2e {
namespace {

constexpr char kJob[] = "e2e-detect";
constexpr int kFaultFrom = 60;
// A deadline, not a measurement: a verdict takes ~20-40 s here; a machine slowed down by outside
// load takes longer, and only a missing verdict should fail the test.
constexpr absl::Duration kVerdictWait = absl::Seconds(180);

// Whether `binary --helpfull` mentions `flag`.
bool HasFlag(const std::string& binary, const std::string& flag) {
  const std::string cmd = absl::StrCat("'", binary, "' --helpfull 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out.find(absl::StrCat("--", flag)) != std::string::npos;
}

// The trainer and controller settings this suite runs with (tuned for a loaded 2-core machine:
// emulated compute is slept, so iteration times hardly depend on the CPU).
harness::LocalClusterOptions BaseOptions(const std::string& faults) {
  harness::LocalClusterOptions o;
  o.dp = 4;
  o.pp = 2;
  o.nodes = 4;
  o.job = kJob;
  o.trainer_args = harness::TunedTrainerArgs();
  o.trainer_args.push_back("--steps=5000");
  o.trainer_args.push_back(absl::StrCat("--faults=", faults));
  o.controller_args = harness::TunedControllerArgs();
  o.start_trainer = false;
  absl::StatusOr<std::string> controller = harness::FindRunfile("controller/falcon_controller");
  if (controller.ok() && HasFlag(*controller, "mitigation")) {
    o.controller_args.push_back("--mitigation=false");
  }
  return o;
}

std::vector<falcon::v1::Event> ListEvents(harness::LocalCluster& cluster) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListEventsRequest req;
  req.set_job(kJob);
  falcon::v1::ListEventsResponse resp;
  if (!stub->ListEvents(&ctx, req, &resp).ok()) return {};
  return {resp.events().begin(), resp.events().end()};
}

// The reasons of the job's directives (the pause names the profiling's suspects).
std::string DirectiveReasons(harness::LocalCluster& cluster) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListDirectivesRequest req;
  req.set_job(kJob);
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

using falcon::tests::e2e::FileTail;

// The job's iteration-time series and event timeline (printed with every failed assertion).
std::string Evidence(harness::LocalCluster& cluster) {
  return falcon::tests::e2e::JobEvidence(*cluster.NewControlStub(), kJob);
}

// Events that began before the fault: false alarms.
int FalseAlarms(harness::LocalCluster& cluster) {
  int n = 0;
  for (const auto& e : ListEvents(cluster)) n += e.onset_iteration() < kFaultFrom - 5;
  return n;
}

void PrintFigures(const falcon::v1::Event& e, absl::Duration wall) {
  std::printf(
      "FIGURES cause=%s ranks=[%s] links=%d healthy_iteration_s=%.4f slow_iteration_s=%.4f "
      "fault_from=%d onset=%lld alarm=%lld verdict=%lld alarm_delay_iterations=%lld "
      "alarm_delay_s=%.2f verdict_delay_s=%.2f wall_until_verdict_s=%.1f\n",
      falcon::v1::Cause_Name(e.cause()).c_str(), absl::StrJoin(e.ranks(), ",").c_str(),
      e.links_size(), e.healthy_iteration_time_ns() * 1e-9, e.slow_iteration_time_ns() * 1e-9,
      kFaultFrom, static_cast<long long>(e.onset_iteration()),
      static_cast<long long>(e.alarm_iteration()), static_cast<long long>(e.verdict_iteration()),
      static_cast<long long>(e.alarm_iteration() - e.onset_iteration()),
      (e.alarm_time_ns() - e.onset_time_ns()) * 1e-9,
      (e.verdict_time_ns() - e.alarm_time_ns()) * 1e-9, absl::ToDoubleSeconds(wall));
  std::fflush(stdout);
}

// Waits for an event matching `want`; on timeout returns the last events seen.
template <typename Pred>
bool AwaitEvent(harness::LocalCluster& cluster, Pred want, falcon::v1::Event* found,
                std::vector<falcon::v1::Event>* last) {
  const absl::Time deadline = absl::Now() + kVerdictWait;
  while (absl::Now() < deadline) {
    *last = ListEvents(cluster);
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

// Starts the cluster with the trainer running `faults`.
absl::StatusOr<std::unique_ptr<harness::LocalCluster>> StartWithFaults(const std::string& faults) {
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> cluster =
      harness::LocalCluster::Start(BaseOptions(faults));
  if (!cluster.ok()) return cluster.status();
  if (absl::Status s = (*cluster)->SetSettings(harness::TunedSettings()); !s.ok()) return s;
  if (absl::Status s = (*cluster)->StartTrainer(); !s.ok()) return s;
  return cluster;
}

TEST(DetectionE2eTest, ComputeFailSlowIsLocalizedToItsRank) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> cluster =
      StartWithFaults(absl::StrCat("compute:rank=5,factor=1.5,from=", kFaultFrom));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  falcon::v1::Event event;
  std::vector<falcon::v1::Event> last;
  const bool ok = AwaitEvent(
      **cluster,
      [](const falcon::v1::Event& e) {
        return Localized(e) && e.cause() == falcon::v1::CAUSE_COMPUTE;
      },
      &event, &last);
  ASSERT_TRUE(ok) << "no COMPUTE event localized within " << kVerdictWait << ":\n"
                  << Describe(last) << Evidence(**cluster) << DirectiveReasons(**cluster)
                  << "\ntrainer log:\n"
                  << FileTail((*cluster)->log_path("trainer")) << "\ncontroller log:\n"
                  << FileTail((*cluster)->log_path("controller"));
  PrintFigures(event, absl::Now() - start);
  EXPECT_EQ(FalseAlarms(**cluster), 0) << Evidence(**cluster);
  EXPECT_EQ(std::vector<uint32_t>(event.ranks().begin(), event.ranks().end()),
            std::vector<uint32_t>{5})
      << Evidence(**cluster);
  EXPECT_GE(event.onset_iteration(), kFaultFrom - 5) << Evidence(**cluster);
  // The trainer is still training (no rank failed).
  EXPECT_TRUE((*cluster)->TrainerRunning()) << FileTail((*cluster)->log_path("trainer"));
}

// Ranks 1 (node0) and 5 (node2) are the two pipeline stages of DP group 1: every forward
// activation crosses 1 -> 5, so a 10 ms delay per message slows the whole job, and the bandwidth
// cap makes the data direction stand out in the validation's link pass (a round trip: a pure
// delay would slow 5 -> 1's acknowledgement as much as 1 -> 5's data).
TEST(DetectionE2eTest, LinkFailSlowIsLocalizedToItsLink) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> cluster =
      StartWithFaults(absl::StrCat("link:src=1,dst=5,delay_ms=10,bw_mbps=200,from=", kFaultFrom));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  falcon::v1::Event event;
  std::vector<falcon::v1::Event> last;
  const bool ok = AwaitEvent(
      **cluster,
      [](const falcon::v1::Event& e) {
        return Localized(e) && e.cause() == falcon::v1::CAUSE_COMMUNICATION;
      },
      &event, &last);
  ASSERT_TRUE(ok) << "no COMMUNICATION event localized within " << kVerdictWait << ":\n"
                  << Describe(last) << Evidence(**cluster) << DirectiveReasons(**cluster)
                  << "\ntrainer log:\n"
                  << FileTail((*cluster)->log_path("trainer")) << "\ncontroller log:\n"
                  << FileTail((*cluster)->log_path("controller"));
  PrintFigures(event, absl::Now() - start);
  std::printf("%s", DirectiveReasons(**cluster).c_str());
  EXPECT_EQ(FalseAlarms(**cluster), 0) << Evidence(**cluster);
  ASSERT_GE(event.links_size(), 1) << Evidence(**cluster);
  EXPECT_EQ(event.links(0).src_rank(), 1u) << Evidence(**cluster);
  EXPECT_EQ(event.links(0).dst_rank(), 5u) << Evidence(**cluster);
  EXPECT_GE(event.onset_iteration(), kFaultFrom - 5) << Evidence(**cluster);
  EXPECT_TRUE((*cluster)->TrainerRunning()) << FileTail((*cluster)->log_path("trainer"));
}

}  // namespace
}  // namespace falcon::tests::e2e
