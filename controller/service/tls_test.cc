// Mutual TLS over real gRPC on loopback (docs/operations.md#tls), with certificates made by
// deploy/pki/falcon-pki.sh in TEST_TMPDIR: a plaintext client of a TLS controller is refused, as
// is a client whose certificate another CA signed; an agent certified for node-a that claims
// node-b is refused with PERMISSION_DENIED naming both, as is a falconctl user's certificate
// (OU=operator) used to connect as an agent; one that claims node-a is served (its connection
// logged with identity=node-a); a rotated controller certificate serves new connections while
// open agent streams stay up.
#include <prometheus/registry.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/testing/log_capture.h"
#include "common/testing/series_value.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/controller_server.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "proto/grpc_tls.h"
#include "tests/testing/skip.h"

namespace falcon::controller::service {
namespace {

using testing::LoopbackAgent;

// Runs falcon-pki.sh with `args` in `dir`; true on success.
bool Pki(const std::string& dir, const std::string& args) {
  const std::string script =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/deploy/pki/falcon-pki.sh");
  return std::system(absl::StrCat(script, " ", dir, " ", args, " >/dev/null").c_str()) == 0;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tests::testing::IsExecutable("/usr/bin/openssl")) {
      FALCON_SKIP_OR_FAIL("/usr/bin/openssl is not installed (Debian: apt-get install openssl)");
    }
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/pki-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    other_ = dir_ + "-other";
    ASSERT_TRUE(Pki(dir_, "ca"));
    ASSERT_TRUE(Pki(dir_, "controller controller IP:127.0.0.1"));
    ASSERT_TRUE(Pki(dir_, "node node-a"));
    ASSERT_TRUE(Pki(dir_, "client node-c operator"));  // A user named like a node.
    ASSERT_TRUE(Pki(other_, "ca"));
    ASSERT_TRUE(Pki(other_, "node node-a"));
    // The controller's files live in their own folder, where the rotation test replaces them.
    live_ = dir_ + "-live";
    ASSERT_TRUE(std::system(absl::StrCat("mkdir -p ", live_, " && cp ", dir_, "/controller.pem ",
                                         dir_, "/controller.key ", dir_, "/ca.pem ", live_)
                                .c_str()) == 0);
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.tick_interval = absl::Milliseconds(20);
    options.tls = Files(live_, "controller");
    options.tls_refresh = absl::Seconds(1);
    auto s = ControllerServer::Start(options, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  static proto::TlsFiles Files(const std::string& dir, const std::string& name) {
    return proto::TlsFiles{absl::StrCat(dir, "/", name, ".pem"),
                           absl::StrCat(dir, "/", name, ".key"), dir + "/ca.pem"};
  }
  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& dir,
                                                        const std::string& name) {
    auto c = proto::MakeChannelCredentials(Files(dir, name));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : grpc::InsecureChannelCredentials();
  }
  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->port()); }
  std::unique_ptr<LoopbackAgent> Agent(const std::string& node) {
    spec_.job = "job-" + node;
    falcon::v1::JobRegistration reg = testing::NodeRegistration(spec_, 0);
    for (auto& r : *reg.mutable_ranks()) r.set_node(node);
    return std::make_unique<LoopbackAgent>(node, node, testing::RanksOfNode(spec_, 0),
                                           std::vector<falcon::v1::JobRegistration>{reg});
  }
  bool Connected(const std::string& agent_id) {
    bool connected = false;
    server_->RunOnLoop([&](Controller& c) { connected = c.hub().IsConnected(agent_id); });
    return connected;
  }
  double Refusals(const char* check) {
    return common::testing::SeriesValue(server_->registry().Collect(), metrics::kPeerRefusals.name,
                                        {{"check", check}})
        .value_or(-1);
  }

  std::string dir_, other_, live_;
  testing::LayoutSpec spec_;
  common::FakeClock clock_;
  std::unique_ptr<ControllerServer> server_;
};

TEST_F(TlsTest, APlaintextClientIsRefused) {
  std::unique_ptr<LoopbackAgent> agent = Agent("node-a");  // Insecure credentials.
  EXPECT_FALSE(agent->Connect(Target(), absl::Seconds(10)).ok());
  EXPECT_FALSE(Connected("node-a"));
  auto control = falcon::v1::Control::NewStub(
      grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  falcon::v1::ListJobsResponse jobs;
  const grpc::Status s = control->ListJobs(&ctx, falcon::v1::ListJobsRequest(), &jobs);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, AClientCertifiedByAnotherCaIsRefused) {
  std::unique_ptr<LoopbackAgent> agent = Agent("node-a");
  agent->set_credentials(Credentials(other_, "node-a"));
  EXPECT_FALSE(agent->Connect(Target(), absl::Seconds(10)).ok());
  EXPECT_FALSE(Connected("node-a"));
}

TEST_F(TlsTest, AnAgentCertifiedForNodeAClaimingNodeBIsRefused) {
  std::unique_ptr<LoopbackAgent> agent = Agent("node-b");
  agent->set_credentials(Credentials(dir_, "node-a"));
  EXPECT_FALSE(agent->Connect(Target(), absl::Seconds(10)).ok());
  absl::StatusOr<grpc::Status> refused = agent->WaitClosed(absl::Seconds(10));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(refused->error_message().find("hello.node: node 'node-b' does not match the peer's "
                                          "certificate (node node-a)"),
            std::string::npos)
      << refused->error_message();
  EXPECT_FALSE(Connected("node-b"));
  EXPECT_EQ(Refusals(metrics::check::kNodeIdentity), 1);
  server_->RunOnLoop([](Controller& c) { EXPECT_EQ(c.registry().size(), 0u); });
}

TEST_F(TlsTest, AUsersCertificateCannotConnectAsAnAgent) {
  std::unique_ptr<LoopbackAgent> agent = Agent("node-c");
  agent->set_credentials(Credentials(dir_, "node-c"));
  EXPECT_FALSE(agent->Connect(Target(), absl::Seconds(10)).ok());
  absl::StatusOr<grpc::Status> refused = agent->WaitClosed(absl::Seconds(10));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(refused->error_message().find("a falconctl user's (OU=operator), not a node's"),
            std::string::npos)
      << refused->error_message();
  EXPECT_FALSE(Connected("node-c"));
}

// The controller's certificate is replaced by one of another CA (its clients' CA stays): a stream
// opened before stays up and is served, and new connections get the new certificate (a client
// trusting only the new CA is refused before, admitted after).
TEST_F(TlsTest, ARotatedCertificateKeepsAgentStreamsUp) {
  ASSERT_TRUE(Pki(other_, "controller controller IP:127.0.0.1"));
  std::unique_ptr<LoopbackAgent> agent = Agent("node-a");
  agent->set_credentials(Credentials(dir_, "node-a"));
  ASSERT_TRUE(agent->Connect(Target(), absl::Seconds(10)).ok());
  // node-a's certificate (of the cluster CA), trusting only the new controller's CA.
  proto::TlsFiles trusting_new = Files(dir_, "node-a");
  trusting_new.ca = other_ + "/ca.pem";
  auto newcomer_credentials = proto::MakeChannelCredentials(trusting_new);
  ASSERT_TRUE(newcomer_credentials.ok());
  auto probe = [&] {
    LoopbackAgent newcomer("probe", "node-a", {}, {});  // node-a's certificate, another id.
    newcomer.set_credentials(*newcomer_credentials);
    return newcomer.Connect(Target(), absl::Seconds(5)).ok();
  };
  EXPECT_FALSE(probe()) << "the new CA is trusted before the rotation";

  // Complete new files renamed over the old ones.
  ASSERT_TRUE(std::system(absl::StrCat("cp ", other_, "/controller.pem ", live_, "/new.pem && cp ",
                                       other_, "/controller.key ", live_, "/new.key && mv ", live_,
                                       "/new.key ", live_, "/controller.key && mv ", live_,
                                       "/new.pem ", live_, "/controller.pem")
                              .c_str()) == 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  bool rotated = false;
  while (!rotated && absl::Now() < deadline) {
    rotated = probe();
    if (!rotated) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(rotated) << "the new certificate was never served";

  // The stream opened before the rotation is still up: a batch sent on it now is stored.
  EXPECT_TRUE(Connected("node-a"));
  falcon::v1::TelemetryBatch batch;
  batch.set_job(spec_.job);
  *batch.add_iterations() = testing::MakeSummary(spec_, 0, 1, 100'000'000);
  agent->Send(batch);
  EXPECT_TRUE(agent->WaitAcked(absl::Seconds(10)).ok());
  EXPECT_TRUE(agent->rejected().empty());
}

TEST_F(TlsTest, AnAgentCertifiedForItsNodeIsServed) {
  common::testing::LogCapture log;
  std::unique_ptr<LoopbackAgent> agent = Agent("node-a");
  agent->set_credentials(Credentials(dir_, "node-a"));
  absl::Status s = agent->Connect(Target(), absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Connected("node-a"));
  // The connection line names the identity the certificate proved.
  const std::vector<std::string> connected = log.Matching("agent connected agent=node-a ");
  ASSERT_EQ(connected.size(), 1u);
  EXPECT_TRUE(absl::EndsWith(connected[0], " identity=node-a")) << connected[0];
  falcon::v1::TelemetryBatch batch;
  batch.set_job(spec_.job);
  *batch.add_iterations() = testing::MakeSummary(spec_, 0, 1, 100'000'000);
  agent->Send(batch);
  EXPECT_TRUE(agent->WaitAcked(absl::Seconds(10)).ok());
  EXPECT_EQ(Refusals(metrics::check::kNodeIdentity), 0);
}

}  // namespace
}  // namespace falcon::controller::service
