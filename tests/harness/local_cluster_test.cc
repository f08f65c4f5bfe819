// LocalCluster with real binaries, without the trainer: everything comes up on loopback, the
// Control API answers, a restarted controller is reconnected by the agents, and Stop() leaves no
// process behind; in TLS mode the agents connect with their node certificates, the cluster's own
// stub acts as its operator, a plaintext client is refused, and restarts keep TLS.
#include "tests/harness/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/http_get.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/grpc_tls.h"
#include "tests/testing/skip.h"

namespace falcon::tests::harness {
namespace {

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

// The /metrics page at HOST:PORT, or the error in its place.
std::string Scrape(const std::string& address) {
  absl::StatusOr<std::string> body = common::testing::HttpGet(address, "/metrics");
  return body.ok() ? *body : body.status().ToString();
}

grpc::Status ListJobs(falcon::v1::Control::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListJobsRequest req;
  falcon::v1::ListJobsResponse resp;
  return stub.ListJobs(&ctx, req, &resp);
}

absl::Status ListJobs(LocalCluster& cluster) {
  grpc::Status s = ListJobs(*cluster.NewControlStub());
  return s.ok() ? absl::OkStatus() : absl::UnavailableError(s.error_message());
}

// Waits up to 30 s until the metrics page at `address` contains `needle`.
bool AwaitMetric(const std::string& address, const std::string& needle) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (Scrape(address).find(needle) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// Waits up to 30 s until the controller log's latest connection line of agent `node` names the
// identity of its node certificate (the controller logs the names the peer's certificate proved).
bool AwaitConnectedWithCertificate(const LocalCluster& cluster, int node) {
  const std::string prefix =
      absl::StrCat("agent connected agent=node", node, " node=node", node, " ");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const std::vector<std::string> lines = LinesWith(cluster.log_path("controller"), prefix);
    if (!lines.empty() && absl::EndsWith(lines.back(), absl::StrCat(" identity=node", node))) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// ListJobs from a client without TLS.
grpc::Status PlaintextListJobs(const LocalCluster& cluster) {
  auto stub = falcon::v1::Control::NewStub(
      grpc::CreateChannel(cluster.controller_address(), grpc::InsecureChannelCredentials()));
  return ListJobs(*stub);
}

TEST(LocalClusterTest, BadLayoutIsRejected) {
  LocalClusterOptions o;
  o.dp = 3;
  o.pp = 1;
  o.nodes = 2;
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("nodes"), std::string::npos) << c.status();
}

TEST(LocalClusterTest, MissingBinaryIsNotFound) {
  LocalClusterOptions o;
  o.controller_binary = "/nonexistent/falcon_controller";
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  EXPECT_TRUE(absl::IsNotFound(c.status())) << c.status();
}

TEST(LocalClusterTest, StartsRestartsAndStopsWithoutLeaks) {
  LocalClusterOptions o;
  o.dp = 2;
  o.pp = 1;
  o.nodes = 2;
  o.start_trainer = false;
  o.controller_args = {"--tick=100ms"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  LocalCluster& cluster = **c;
  EXPECT_NE(cluster.controller_address().find("127.0.0.1:"), std::string::npos);
  EXPECT_NE(cluster.controller_metrics().find("127.0.0.1:"), std::string::npos);
  ASSERT_EQ(cluster.agent_metrics().size(), 2u);
  EXPECT_TRUE(ListJobs(cluster).ok());
  EXPECT_TRUE(cluster.SetSettings(TunedSettings()).ok());
  EXPECT_FALSE(cluster.TrainerRunning());
  const std::vector<pid_t> before = cluster.pids();
  ASSERT_EQ(before.size(), 3u);  // Controller and two agents.

  const std::string address = cluster.controller_address();
  ASSERT_TRUE(cluster.RestartController(/*kill=*/true).ok());
  EXPECT_TRUE(ListJobs(cluster).ok());
  // The agents reconnect to the restarted controller on their own (a second connect). Only when
  // the port could be kept: the agents do not learn a new address.
  if (cluster.controller_address() == address) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    bool reconnected = false;
    while (!reconnected && absl::Now() < deadline) {
      reconnected = Scrape(cluster.agent_metrics()[0])
                        .find("falcon_agent_controller_connects_total{node=\"node0\"} 2") !=
                    std::string::npos;
      if (!reconnected) absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_TRUE(reconnected) << Scrape(cluster.agent_metrics()[0]);
  }
  const std::vector<pid_t> running = cluster.pids();
  ASSERT_EQ(running.size(), 3u);
  const std::string work_dir = cluster.work_dir();
  cluster.Stop();
  for (pid_t p : running) EXPECT_FALSE(Alive(p)) << "pid " << p << " survived Stop()";
  EXPECT_TRUE(cluster.pids().empty());
  EXPECT_FALSE(std::ifstream(work_dir + "/controller.log").good()) << "work dir not removed";
}

TEST(LocalClusterTest, MissingPkiScriptIsNotFound) {
  LocalClusterOptions o;
  o.tls = true;
  o.pki_script = "/nonexistent/falcon-pki.sh";
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  EXPECT_TRUE(absl::IsNotFound(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("pki_script"), std::string::npos) << c.status();
}

TEST(LocalClusterTest, TlsClusterAuthenticatesEveryPeerAndKeepsTlsAcrossRestarts) {
  FALCON_REQUIRE_EXECUTABLE("/usr/bin/openssl", "Debian: apt-get install openssl");
  LocalClusterOptions o;
  o.dp = 2;
  o.pp = 1;
  o.nodes = 2;
  o.start_trainer = false;
  o.tls = true;
  o.controller_args = {"--tick=100ms"};
  absl::StatusOr<std::unique_ptr<LocalCluster>> c = LocalCluster::Start(o);
  ASSERT_TRUE(c.ok()) << c.status();
  LocalCluster& cluster = **c;
  ASSERT_EQ(cluster.pki_dir(), cluster.work_dir() + "/pki");
  for (const char* name : {"ca", "controller", "node0", "node1", kTlsOperator}) {
    EXPECT_TRUE(std::ifstream(absl::StrCat(cluster.pki_dir(), "/", name, ".pem")).good()) << name;
  }
  const std::string controller_log = cluster.log_path("controller");
  EXPECT_TRUE(LinesWith(controller_log, "plaintext gRPC").empty()) << "a plaintext warning";
  for (int n = 0; n < 2; ++n) {
    EXPECT_TRUE(
        LinesWith(cluster.log_path(absl::StrCat("agent-node", n)), "plaintext gRPC").empty());
    EXPECT_TRUE(AwaitConnectedWithCertificate(cluster, n)) << controller_log;
  }

  // The cluster's stub presents the operator's certificate: SetSettings is allowed and audited
  // under its identity.
  EXPECT_TRUE(ListJobs(cluster).ok());
  ASSERT_TRUE(cluster.SetSettings(TunedSettings()).ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    falcon::v1::ListAuditResponse audit;
    ASSERT_TRUE(cluster.NewControlStub()->ListAudit(&ctx, {}, &audit).ok());
    ASSERT_EQ(audit.records_size(), 1);
    EXPECT_EQ(audit.records(0).method(), "SetSettings");
    EXPECT_EQ(audit.records(0).identity(), kTlsOperator);
    EXPECT_EQ(audit.records(0).role(), "operator");
  }
  // A plaintext client fails the handshake.
  EXPECT_EQ(PlaintextListJobs(cluster).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A viewer made for the test may read but not change the settings.
  absl::StatusOr<proto::TlsFiles> viewer = cluster.MakeClientCertificate("alice", "viewer");
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> viewer_credentials =
      proto::MakeChannelCredentials(*viewer);
  ASSERT_TRUE(viewer_credentials.ok()) << viewer_credentials.status();
  auto as_viewer = falcon::v1::Control::NewStub(
      grpc::CreateChannel(cluster.controller_address(), *viewer_credentials));
  EXPECT_TRUE(ListJobs(*as_viewer).ok());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    falcon::v1::SetSettingsRequest req;
    *req.mutable_settings() = TunedSettings();
    falcon::v1::Settings out;
    EXPECT_EQ(as_viewer->SetSettings(&ctx, req, &out).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // The same certificate again is the script's error, with its output.
  absl::StatusOr<proto::TlsFiles> again = cluster.MakeClientCertificate("alice", "viewer");
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("exists"), std::string::npos) << again.status();

  // Restarts keep TLS: the killed agent reconnects with its certificate (a second connect), the
  // restarted controller serves the operator's stub and is reconnected by the agents.
  ASSERT_TRUE(cluster.RestartAgent(1, /*kill=*/true).ok());
  EXPECT_TRUE(LinesWith(cluster.log_path("agent-node1"), "plaintext gRPC").empty());
  EXPECT_TRUE(AwaitMetric(cluster.agent_metrics()[1],
                          "falcon_agent_controller_connects_total{node=\"node1\"} 1"))
      << Scrape(cluster.agent_metrics()[1]);
  EXPECT_TRUE(AwaitConnectedWithCertificate(cluster, 1)) << controller_log;
  const std::string address = cluster.controller_address();
  ASSERT_TRUE(cluster.RestartController(/*kill=*/true).ok());
  EXPECT_TRUE(LinesWith(controller_log, "plaintext gRPC").empty()) << "a plaintext warning";
  EXPECT_TRUE(ListJobs(cluster).ok());
  EXPECT_EQ(PlaintextListJobs(cluster).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The agents do not learn a new address: only when the port could be kept.
  if (cluster.controller_address() == address) {
    for (int n = 0; n < 2; ++n) {
      EXPECT_TRUE(AwaitConnectedWithCertificate(cluster, n)) << controller_log;
    }
  }

  // An agent with node0's certificate that claims another node is refused, and its own log says
  // why (the controller's status, not a cancellation).
  const std::string impostor_log = cluster.work_dir() + "/impostor.log";
  common::SpawnOptions spawn;
  const proto::TlsFiles node0 = cluster.tls_files("node0");
  spawn.argv = {cluster.options().agent_binary,
                absl::StrCat("--controller=", cluster.controller_address()),
                absl::StrCat("--tls_cert=", node0.cert),
                absl::StrCat("--tls_key=", node0.key),
                absl::StrCat("--tls_ca=", node0.ca),
                absl::StrCat("--socket=", cluster.work_dir(), "/impostor.sock"),
                "--node=impostor",
                "--metrics_listen=127.0.0.1:0",
                "--backoff_max=1s"};
  spawn.stdin_stream = common::Stdio::Null();
  spawn.stdout_stream = common::Stdio::File(impostor_log, /*append=*/false);
  spawn.stderr_stream = common::Stdio::SameAsStdout();
  absl::StatusOr<common::Subprocess> impostor = common::Subprocess::Spawn(spawn);
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> refused;
  while (refused.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    refused = LinesWith(impostor_log, "status=PERMISSION_DENIED");
  }
  ASSERT_FALSE(refused.empty()) << impostor_log;
  EXPECT_NE(refused[0].find("controller connect failed"), std::string::npos) << refused[0];
  EXPECT_NE(refused[0].find("impostor"), std::string::npos) << refused[0];
  EXPECT_NE(refused[0].find("node0"), std::string::npos) << refused[0];
  EXPECT_TRUE(impostor->Stop(SIGTERM, absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace falcon::tests::harness
