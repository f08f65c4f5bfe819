// The shim socket's peer checks (docs/operations.md#shim-socket) on a real unix socket: the socket
// is mode 0660; a process of a uid the agent does not allow (a forked child that drops to uid
// 65534 with setuid; tests run as root) is closed before any gRPC, logged and counted in
// falcon_agent_errors_total{where="shim_peer_refused"}; the same uid is served once socket_uids
// lists it, or once its primary gid is in socket_gids; the uid a stream's peer runs as reaches the
// hub, which keeps a job's ranks to the uid that holds the job.
#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "agent/agent_metrics_table.h"
#include "agent/shim_hub.h"
#include "agent/shim_service.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "proto/falcon/v1/shim.grpc.pb.h"
#include "tests/testing/skip.h"

namespace falcon::agent {
namespace {

constexpr uid_t kNobody = 65534;

class NullSink : public ControllerSink {
 public:
  void Send(v1::AgentMessage) override {}
};

class FakeStream : public ShimStream {
 public:
  void Send(const v1::AgentToShim&) override {}
  void Close(const absl::Status&) override {}
};

v1::ShimMessage Hello(uint32_t rank) {
  v1::ShimMessage m;
  v1::ShimHello* h = m.mutable_hello();
  h->set_job("job1");
  h->set_world_size(2);
  h->mutable_rank()->set_rank(rank);
  h->mutable_rank()->set_node("n1");
  h->mutable_rank()->set_pid(100 + static_cast<int32_t>(rank));
  h->mutable_rank()->set_gpu(-1);
  h->mutable_rank()->set_dp_index(-1);
  h->mutable_rank()->set_pp_index(-1);
  h->mutable_rank()->set_tp_index(-1);
  return m;
}

// In a forked child running as `uid`/`gid`: connects to `path`, sends an HTTP/2 client preface
// and an empty SETTINGS frame, and reads. Returns 0 when the server answered (a gRPC server sends
// its SETTINGS), 1 when it closed the connection without a byte, 2 when the child could not run.
// Only system calls after fork (the parent is multi-threaded).
int ConnectAs(const std::string& path, uid_t uid, gid_t gid) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      _exit(2);
    }
    // A refused connection may be closed already: no SIGPIPE.
    (void)!send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL);
    timeval timeout{20, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char buf[64];
    const ssize_t n = read(fd, buf, sizeof(buf));
    _exit(n > 0 ? 0 : n == 0 || errno == ECONNRESET || errno == EPIPE ? 1 : 2);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 2;
  return WEXITSTATUS(status);
}

// Whether a forked child can drop to `uid`.
bool CanBecome(uid_t uid) {
  const pid_t pid = fork();
  if (pid == 0) _exit(setgroups(0, nullptr) == 0 && setgid(uid) == 0 && setuid(uid) == 0 ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

class ShimSocketTest : public ::testing::Test {
 protected:
  ShimSocketTest()
      : registry_(std::make_shared<prometheus::Registry>()),
        metrics_(registry_, "n1", "test"),
        hub_(HubOptions(), clock_, &metrics_, &sink_) {}

  static ShimHub::Options HubOptions() {
    ShimHub::Options o;
    o.node = "n1";
    return o;
  }

  void SetUp() override {
    if (geteuid() != 0) FALCON_SKIP_OR_FAIL("needs root: the test drops to other uids (setuid)");
    if (!CanBecome(kNobody)) {
      FALCON_SKIP_OR_FAIL("cannot setuid to 65534 here (a user namespace mapping only root?)");
    }
    char tmpl[] = "/tmp/falcon-shim-socket-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // Let the children reach the socket; its own mode decides.
    path_ = dir_ + "/agent.sock";
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
    std::filesystem::remove_all(dir_);
  }

  void Start(ShimServer::Options o) {
    o.socket_path = path_;
    o.errors = &metrics_;
    auto s = ShimServer::Start(o, &hub_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  double Refused() {
    for (const prometheus::MetricFamily& f : registry_->Collect()) {
      if (f.name != metric::kErrors.name) continue;
      for (const auto& c : f.metric) {
        for (const auto& l : c.label) {
          if (l.name == "where" && l.value == metric::where::kShimPeerRefused) {
            return c.counter.value;
          }
        }
      }
    }
    return -1;
  }

  common::FakeClock clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  AgentMetrics metrics_;
  NullSink sink_;
  ShimHub hub_;
  std::string dir_, path_;
  std::unique_ptr<ShimServer> server_;
};

TEST_F(ShimSocketTest, AUidThatIsNotAllowedIsRefusedLoggedAndCounted) {
  Start({});
  // 0660: the mode alone would already keep "other" out; open it to show the peer check holds.
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  EXPECT_EQ(ConnectAs(path_, kNobody, kNobody), 1);
  EXPECT_EQ(Refused(), 1);
  EXPECT_EQ(hub_.stats().sessions_opened, 0u);
  EXPECT_EQ(ConnectAs(path_, 0, 0), 0);  // Root is allowed.
  EXPECT_EQ(Refused(), 1);
}

TEST_F(ShimSocketTest, AllowedUidsAndGidsAreServed) {
  ShimServer::Options o;
  o.allowed_uids = {kNobody};
  o.allowed_gids = {4242};
  Start(o);
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  EXPECT_EQ(ConnectAs(path_, kNobody, kNobody), 0);
  EXPECT_EQ(ConnectAs(path_, 4000, 4242), 0);  // By its primary gid.
  EXPECT_EQ(ConnectAs(path_, 4000, 4000), 1);
  EXPECT_EQ(Refused(), 1);
}

// The stream's uid comes from the socket: this process (root) is the owner of a job root's shim
// attached first, and is refused a job a shim of another uid holds.
TEST_F(ShimSocketTest, TheHubKeepsAJobToTheUidOfItsShims) {
  Start({});
  FakeStream root_shim, other_shim;
  const uint64_t a = hub_.Open(&root_shim, 0);
  hub_.OnMessage(a, Hello(0));
  auto stub = v1::Shim::NewStub(
      grpc::CreateChannel(absl::StrCat("unix:", path_), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    auto stream = stub->Attach(&ctx);
    ASSERT_TRUE(stream->Write(Hello(1)));
    v1::AgentToShim reply;
    ASSERT_TRUE(stream->Read(&reply));
    EXPECT_TRUE(reply.has_welcome()) << reply.ShortDebugString();
    stream->WritesDone();
    ctx.TryCancel();
    (void)stream->Finish();
  }
  hub_.OnClosed(a);
  // Now a job held by uid 1000.
  const uint64_t b = hub_.Open(&other_shim, 1000);
  v1::ShimMessage hello = Hello(0);
  hello.mutable_hello()->set_job("job2");
  hub_.OnMessage(b, hello);
  grpc::ClientContext ctx;
  auto stream = stub->Attach(&ctx);
  hello.mutable_hello()->mutable_rank()->set_rank(1);
  ASSERT_TRUE(stream->Write(hello));
  v1::AgentToShim reply;
  EXPECT_FALSE(stream->Read(&reply));
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("uid 1000, not uid 0"), std::string::npos) << s.error_message();
  EXPECT_EQ(hub_.stats().owner_refusals, 1u);
}

}  // namespace
}  // namespace falcon::agent
