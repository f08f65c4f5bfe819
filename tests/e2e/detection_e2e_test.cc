// Detection end to end on a real training run: LocalCluster (tests/harness) starts the controller,
// one agent per emulated node and the reference trainer (DP=4 x PP=2, 8 ranks, 4 emulated nodes,
// every rank on the real shim); a fault injected into the trainer must show up as a controller
// event with the right cause and culprit, reaching LOCALIZED. Mitigation is off when the
// controller has the flag, so the verdict is judged on its own (detection_scenario.h; its TLS
// variant is tls_e2e_test).
//
// Figures (iteration time, alarm delay, verdict iteration, wall time) are printed for the report.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/e2e/detection_scenario.h"
#include "tests/e2e/evidence.h"
#include "tests/harness/local_cluster.h"

namespace falcon::tests::e2e {
namespace {

constexpr char kJob[] = "e2e-detect";
constexpr int kFaultFrom = kDetectionFaultFrom;

// The job's iteration-time series and event timeline (printed with every failed assertion).
std::string Evidence(harness::LocalCluster& cluster) {
  return JobEvidence(*cluster.NewControlStub(), kJob);
}

// Starts the cluster with the trainer running `faults`.
absl::StatusOr<std::unique_ptr<harness::LocalCluster>> StartWithFaults(const std::string& faults) {
  return StartDetectionCluster(DetectionOptions(kJob, faults));
}

TEST(DetectionE2eTest, ComputeFailSlowIsLocalizedToItsRank) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<harness::LocalCluster>> cluster =
      StartWithFaults(absl::StrCat("compute:rank=5,factor=1.5,from=", kFaultFrom));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  falcon::v1::Event event;
  std::vector<falcon::v1::Event> last;
  const bool ok = AwaitEvent(
      **cluster, kJob,
      [](const falcon::v1::Event& e) {
        return Localized(e) && e.cause() == falcon::v1::CAUSE_COMPUTE;
      },
      kVerdictWait, &event, &last);
  ASSERT_TRUE(ok) << "no COMPUTE event localized within " << kVerdictWait << ":\n"
                  << MissingVerdictEvidence(**cluster, kJob, last);
  PrintFigures(event, kFaultFrom, absl::Now() - start);
  EXPECT_EQ(FalseAlarms(**cluster, kJob, kFaultFrom), 0) << Evidence(**cluster);
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
      **cluster, kJob,
      [](const falcon::v1::Event& e) {
        return Localized(e) && e.cause() == falcon::v1::CAUSE_COMMUNICATION;
      },
      kVerdictWait, &event, &last);
  ASSERT_TRUE(ok) << "no COMMUNICATION event localized within " << kVerdictWait << ":\n"
                  << MissingVerdictEvidence(**cluster, kJob, last);
  PrintFigures(event, kFaultFrom, absl::Now() - start);
  std::printf("%s", DirectiveReasons(**cluster, kJob).c_str());
  EXPECT_EQ(FalseAlarms(**cluster, kJob, kFaultFrom), 0) << Evidence(**cluster);
  ASSERT_GE(event.links_size(), 1) << Evidence(**cluster);
  EXPECT_EQ(event.links(0).src_rank(), 1u) << Evidence(**cluster);
  EXPECT_EQ(event.links(0).dst_rank(), 5u) << Evidence(**cluster);
  EXPECT_GE(event.onset_iteration(), kFaultFrom - 5) << Evidence(**cluster);
  EXPECT_TRUE((*cluster)->TrainerRunning()) << FileTail((*cluster)->log_path("trainer"));
}

}  // namespace
}  // namespace falcon::tests::e2e
