// Authorization and the audit trail of the Control API (docs/operations.md#authorization-and-audit)
// over real gRPC on loopback, with certificates made by deploy/pki/falcon-pki.sh: a viewer's
// SetSettings and ForceValidation get PERMISSION_DENIED naming the method and the identity and
// change nothing; an operator's SetSettings applies; every call is in the audit trail
// (ListAudit, newest first, paged) and the trail survives a controller restart (RocksDB). A
// plaintext controller audits its callers as "plaintext" with the operator role.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/service/controller_server.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "proto/grpc_tls.h"
#include "tests/testing/skip.h"

namespace falcon::controller::service {
namespace {

bool Pki(const std::string& dir, const std::string& args) {
  const std::string script =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/falcon/deploy/pki/falcon-pki.sh");
  return std::system(absl::StrCat(script, " ", dir, " ", args, " >/dev/null").c_str()) == 0;
}

proto::TlsFiles Files(const std::string& dir, const std::string& name) {
  return proto::TlsFiles{absl::StrCat(dir, "/", name, ".pem"), absl::StrCat(dir, "/", name, ".key"),
                         dir + "/ca.pem"};
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

class AuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    base_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", test);
    dir_ = base_ + "-pki";
    options_.listen = "127.0.0.1:0";
    options_.tick_interval = absl::Milliseconds(20);
    options_.data_dir = base_ + "-store";
  }

  void MakePki() {
    if (!tests::testing::IsExecutable("/usr/bin/openssl")) {
      FALCON_SKIP_OR_FAIL("/usr/bin/openssl is not installed (Debian: apt-get install openssl)");
    }
    ASSERT_TRUE(Pki(dir_, "ca"));
    ASSERT_TRUE(Pki(dir_, "controller controller IP:127.0.0.1"));
    ASSERT_TRUE(Pki(dir_, "client alice operator"));
    ASSERT_TRUE(Pki(dir_, "client bob viewer"));
    ASSERT_TRUE(Pki(dir_, "node node-a"));
    options_.tls = Files(dir_, "controller");
  }

  void StartServer() {
    auto s = ControllerServer::Start(options_, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  std::unique_ptr<falcon::v1::Control::Stub> Client(const std::string& name) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!name.empty()) {
      auto c = proto::MakeChannelCredentials(Files(dir_, name));
      EXPECT_TRUE(c.ok()) << c.status();
      if (c.ok()) credentials = *c;
    }
    return falcon::v1::Control::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()), credentials));
  }

  static grpc::Status DisableDetection(falcon::v1::Control::Stub& stub) {
    falcon::v1::SetSettingsRequest req;
    req.mutable_settings()->set_detection_enabled(false);
    falcon::v1::Settings out;
    return stub.SetSettings(Context().get(), req, &out);
  }
  static bool DetectionEnabled(falcon::v1::Control::Stub& stub) {
    falcon::v1::Settings out;
    EXPECT_TRUE(stub.GetSettings(Context().get(), falcon::v1::GetSettingsRequest(), &out).ok());
    return out.detection_enabled();
  }
  // Every audit record, newest first, read in pages of `page_size`.
  static std::vector<falcon::v1::AuditRecord> Audit(falcon::v1::Control::Stub& stub,
                                                    uint32_t page_size = 0) {
    std::vector<falcon::v1::AuditRecord> all;
    falcon::v1::ListAuditRequest req;
    req.set_page_size(page_size);
    for (;;) {
      falcon::v1::ListAuditResponse page;
      const grpc::Status s = stub.ListAudit(Context().get(), req, &page);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) return all;
      for (const auto& r : page.records()) all.push_back(r);
      if (page.next_page_token().empty()) return all;
      req.set_page_token(page.next_page_token());
    }
  }

  std::string base_, dir_;
  ServerOptions options_;
  common::FakeClock clock_;
  std::unique_ptr<ControllerServer> server_;
};

TEST_F(AuthzTest, AViewerIsRefusedAnOperatorServedAndBothAuditedAcrossARestart) {
  MakePki();
  StartServer();
  auto bob = Client("bob");
  auto alice = Client("alice");

  grpc::Status s = DisableDetection(*bob);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("SetSettings"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("\"bob\""), std::string::npos) << s.error_message();
  EXPECT_TRUE(DetectionEnabled(*bob));  // A viewer reads; its refused write changed nothing.

  falcon::v1::ForceValidationRequest force;
  force.set_job("some-job");
  falcon::v1::ForceValidationResponse forced;
  s = bob->ForceValidation(Context().get(), force, &forced);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("ForceValidation"), std::string::npos) << s.error_message();

  // A node's certificate is no operator either.
  auto node = Client("node-a");
  EXPECT_EQ(DisableDetection(*node).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  s = DisableDetection(*alice);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(DetectionEnabled(*bob));

  auto check = [](const std::vector<falcon::v1::AuditRecord>& audit) {
    ASSERT_EQ(audit.size(), 4u);
    EXPECT_EQ(audit[0].identity(), "alice");
    EXPECT_EQ(audit[0].role(), "operator");
    EXPECT_EQ(audit[0].method(), "SetSettings");
    EXPECT_EQ(audit[0].result(), "OK");
    EXPECT_NE(audit[0].request().find("detection_enabled: false"), std::string::npos)
        << audit[0].request();
    EXPECT_EQ(audit[1].identity(), "node-a");
    EXPECT_EQ(audit[1].role(), "node");
    EXPECT_EQ(audit[2].identity(), "bob");
    EXPECT_EQ(audit[2].method(), "ForceValidation");
    EXPECT_NE(audit[2].request().find("some-job"), std::string::npos) << audit[2].request();
    EXPECT_EQ(audit[3].identity(), "bob");
    EXPECT_EQ(audit[3].role(), "viewer");
    EXPECT_EQ(audit[3].method(), "SetSettings");
    EXPECT_EQ(audit[3].result().rfind("PERMISSION_DENIED: SetSettings", 0), 0u)
        << audit[3].result();
    for (size_t i = 0; i < audit.size(); ++i) {
      EXPECT_EQ(audit[i].audit_id(), audit.size() - i);
      EXPECT_NE(audit[i].peer().find("127.0.0.1"), std::string::npos) << audit[i].peer();
    }
  };
  check(Audit(*bob));
  check(Audit(*bob, /*page_size=*/1));
  falcon::v1::ListAuditRequest first_two;
  first_two.set_limit(2);
  falcon::v1::ListAuditResponse page;
  ASSERT_TRUE(bob->ListAudit(Context().get(), first_two, &page).ok());
  EXPECT_EQ(page.records_size(), 2);
  EXPECT_TRUE(page.next_page_token().empty());

  // A restart keeps the trail (and the setting), and ids go on.
  bob.reset();
  alice.reset();
  node.reset();
  server_->Shutdown();
  server_.reset();
  StartServer();
  alice = Client("alice");
  check(Audit(*alice));
  EXPECT_FALSE(DetectionEnabled(*alice));
  ASSERT_TRUE(DisableDetection(*alice).ok());
  const std::vector<falcon::v1::AuditRecord> after = Audit(*alice);
  ASSERT_EQ(after.size(), 5u);
  EXPECT_EQ(after[0].audit_id(), 5u);
  EXPECT_EQ(after[0].identity(), "alice");
}

TEST_F(AuthzTest, APlaintextControllerAuditsItsCallersAsPlaintextOperators) {
  StartServer();  // No TLS files: plaintext.
  auto anyone = Client("");
  ASSERT_TRUE(DisableDetection(*anyone).ok());
  const std::vector<falcon::v1::AuditRecord> audit = Audit(*anyone);
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].identity(), "plaintext");
  EXPECT_EQ(audit[0].role(), "operator");
  EXPECT_EQ(audit[0].result(), "OK");
}

}  // namespace
}  // namespace falcon::controller::service
