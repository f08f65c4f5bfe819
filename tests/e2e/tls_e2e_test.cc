// The compute fail-slow detection scenario (detection_scenario.h: a x1.5 CPU quota on rank 5's
// device thread from iteration kDetectionFaultFrom, applied by the kernel fault driver on the
// netns cluster, mitigation off) on a cluster that runs mutual TLS end to end
// (LocalClusterOptions::tls, docs/operations.md#tls): certificates made by
// deploy/pki/falcon-pki.sh, every agent connected with its node's certificate, the test's Control
// calls made as the cluster's operator. The verdict must name rank 5 (COMPUTE), the controller
// must have logged no plaintext warning and each agent's connection under the identity its
// certificate proves, its audit trail must hold the operator's SetSettings, a plaintext client
// must be refused, and the trainer must still run. Skipped (failed under CI=true) without
// /usr/bin/openssl or where network namespaces cannot be made.
//
// Figures (iteration time, alarm delay, verdict iteration, wall time) are printed for the report.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/e2e/detection_scenario.h"
#include "tests/e2e/evidence.h"
#include "tests/e2e/kernel_cluster.h"
#include "tests/harness/local_cluster.h"
#include "tests/testing/require_netns.h"
#include "tests/testing/skip.h"

namespace falcon::tests::e2e {
namespace {

constexpr char kJob[] = "e2e-tls";
constexpr int kFaultFrom = kDetectionFaultFrom;
constexpr int kNodes = 4;

TEST(TlsE2eTest, ComputeFailSlowIsLocalizedToItsRankOverMutualTls) {
  FALCON_REQUIRE_EXECUTABLE("/usr/bin/openssl", "Debian: apt-get install openssl");
  const absl::Time start = absl::Now();
  FALCON_REQUIRE_NETNS();
  KernelClusterOptions options = DetectionScenario(kJob);
  options.tls = true;
  absl::StatusOr<std::unique_ptr<KernelCluster>> started = KernelCluster::Start(std::move(options));
  ASSERT_TRUE(started.ok()) << started.status();
  harness::LocalCluster& cluster = (*started)->cluster();

  falcon::v1::Event event;
  std::vector<falcon::v1::Event> last;
  const bool ok = AwaitEvent(
      cluster, kJob,
      [](const falcon::v1::Event& e) {
        return Localized(e) && e.cause() == falcon::v1::CAUSE_COMPUTE;
      },
      kVerdictWait, &event, &last);
  ASSERT_TRUE(ok) << "no COMPUTE event localized within " << kVerdictWait << ":\n"
                  << MissingVerdictEvidence(cluster, kJob, last);
  PrintFigures(event, kFaultFrom, absl::Now() - start);
  const std::string evidence = JobEvidence(*cluster.NewControlStub(), kJob);
  EXPECT_EQ(std::vector<uint32_t>(event.ranks().begin(), event.ranks().end()),
            std::vector<uint32_t>{5})
      << evidence;
  EXPECT_EQ(FalseAlarms(cluster, kJob, kFaultFrom), 0) << evidence;
  EXPECT_GE(event.onset_iteration(), kFaultFrom - 5) << evidence;

  // TLS all the way: no daemon warned of plaintext, and every agent's connection was logged under
  // the node its certificate names (identity=plaintext without TLS).
  const std::string controller_log = cluster.log_path("controller");
  EXPECT_TRUE(harness::LinesWith(controller_log, "plaintext").empty()) << FileTail(controller_log);
  for (int n = 0; n < kNodes; ++n) {
    const std::string node = absl::StrCat("node", n);
    const std::string agent_log = cluster.log_path("agent-" + node);
    EXPECT_TRUE(harness::LinesWith(agent_log, "plaintext gRPC").empty()) << FileTail(agent_log);
    const std::vector<std::string> connected = harness::LinesWith(
        controller_log, absl::StrCat("agent connected agent=", node, " node=", node, " "));
    ASSERT_FALSE(connected.empty()) << node << " never connected:\n" << FileTail(controller_log);
    for (const std::string& line : connected) {
      EXPECT_TRUE(absl::EndsWith(line, " identity=" + node)) << line;
    }
  }
  // The cluster's two SetSettings (the defaults with detection off, then detection on after the
  // warm-up) went over TLS as its operator: audited under that identity.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    falcon::v1::ListAuditResponse audit;
    const grpc::Status s =
        cluster.NewControlStub()->ListAudit(&ctx, falcon::v1::ListAuditRequest(), &audit);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(audit.records_size(), 2) << audit.DebugString();
    for (const falcon::v1::AuditRecord& r : audit.records()) {
      EXPECT_EQ(r.method(), "SetSettings");
      EXPECT_EQ(r.identity(), harness::kTlsOperator);
      EXPECT_EQ(r.role(), "operator");
      EXPECT_EQ(r.result(), "OK");
    }
  }
  // A client without TLS fails the handshake.
  {
    auto plaintext = falcon::v1::Control::NewStub(
        grpc::CreateChannel(cluster.controller_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    falcon::v1::ListJobsResponse jobs;
    const grpc::Status s = plaintext->ListJobs(&ctx, falcon::v1::ListJobsRequest(), &jobs);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  // The trainer is still training (no rank failed).
  EXPECT_TRUE(cluster.TrainerRunning()) << FileTail(cluster.log_path("trainer"));
}

}  // namespace
}  // namespace falcon::tests::e2e
