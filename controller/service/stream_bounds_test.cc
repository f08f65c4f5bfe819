// Streams over real gRPC on loopback: a connection that goes silent (a frozen TCP proxy: no byte
// passes, nothing is closed) is closed by the server's keepalive and its agent marked
// disconnected; a stream without messages or heartbeats is closed by the idle timeout (on the
// injected clock) with UNAVAILABLE; the agent then reconnects normally; a peer's streams beyond
// max_streams_per_peer are refused with RESOURCE_EXHAUSTED.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/series_value.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/controller_server.h"
#include "controller/service/stream_limiter.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"

namespace falcon::controller::service {
namespace {

using testing::LoopbackAgent;

// A TCP proxy on 127.0.0.1 that forwards every connection to `target_port` until frozen; frozen,
// it forwards nothing and closes nothing, as a network that silently drops packets.
class FreezableProxy {
 public:
  explicit FreezableProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        pipe(wake_) != 0) {
      ADD_FAILURE() << "proxy: cannot listen";
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~FreezableProxy() {
    stop_ = true;
    if (write(wake_[1], "x", 1) < 0) ADD_FAILURE() << "proxy: cannot wake";
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }
  int port() const { return port_; }
  void Freeze() {
    frozen_ = true;
    if (write(wake_[1], "x", 1) < 0) ADD_FAILURE() << "proxy: cannot wake";
  }

 private:
  void Run() {
    while (!stop_) {
      std::vector<pollfd> polled = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      if (!frozen_) {
        for (int fd : fds_) polled.push_back({fd, POLLIN, 0});
      }
      if (poll(polled.data(), polled.size(), -1) < 0) return;
      if (polled[0].revents != 0) {
        char buf[16];
        if (read(wake_[0], buf, sizeof(buf)) < 0) return;
        continue;
      }
      if (polled[1].revents != 0) Accept();
      for (size_t i = 2; i < polled.size(); ++i) {
        if (polled[i].revents == 0) continue;
        char buf[1 << 16];
        const ssize_t n = read(polled[i].fd, buf, sizeof(buf));
        const int peer = fds_[(i - 2) ^ 1];  // Pairs are (client, upstream) at (2k, 2k + 1).
        if (n <= 0) {
          shutdown(peer, SHUT_WR);
          continue;
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = write(peer, buf + off, n - off);
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
  void Accept() {
    const int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    const int upstream = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(client);
      close(upstream);
      return;
    }
    fds_.push_back(client);
    fds_.push_back(upstream);
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::vector<int> fds_;  // Proxy thread only (and the destructor after the join).
  std::atomic<bool> frozen_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class StreamBoundsTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options) {
    options.listen = "127.0.0.1:0";
    options.tick_interval = absl::Milliseconds(20);
    auto s = ControllerServer::Start(options, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->port()); }
  std::unique_ptr<LoopbackAgent> Agent(const std::string& id) {
    spec_.job = "job-" + id;
    return std::make_unique<LoopbackAgent>(
        id, "node-0", testing::RanksOfNode(spec_, 0),
        std::vector<falcon::v1::JobRegistration>{testing::NodeRegistration(spec_, 0)});
  }
  bool Connected(const std::string& agent_id) {
    bool connected = false;
    server_->RunOnLoop([&](Controller& c) { connected = c.hub().IsConnected(agent_id); });
    return connected;
  }
  // Waits (up to a minute) until the agent's connection state is `want`.
  bool WaitConnected(const std::string& agent_id, bool want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (Connected(agent_id) != want) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }
  double Counter(const std::string& name, const std::map<std::string, std::string>& labels) {
    return common::testing::SeriesValue(server_->registry().Collect(), name, labels).value_or(0);
  }

  testing::LayoutSpec spec_;
  common::FakeClock clock_;
  std::unique_ptr<ControllerServer> server_;
};

TEST_F(StreamBoundsTest, KeepaliveClosesASilentConnectionAndTheAgentReconnects) {
  ServerOptions options;
  options.keepalive_time = absl::Milliseconds(200);
  options.keepalive_timeout = absl::Milliseconds(200);
  options.controller.stream_idle_timeout = absl::InfiniteDuration();  // Keepalive alone.
  Start(options);
  std::unique_ptr<LoopbackAgent> agent = Agent("node-0");
  FreezableProxy proxy(server_->port());
  ASSERT_TRUE(agent->Connect(absl::StrCat("127.0.0.1:", proxy.port()), absl::Seconds(20)).ok());
  ASSERT_TRUE(Connected("node-0"));
  proxy.Freeze();  // The agent's host hangs: not a byte, not a FIN.
  EXPECT_TRUE(WaitConnected("node-0", false)) << "the silent connection was never closed";
  // The live agent reconnects normally.
  std::unique_ptr<LoopbackAgent> again = Agent("node-0");
  ASSERT_TRUE(again->Connect(Target(), absl::Seconds(20)).ok());
  EXPECT_TRUE(Connected("node-0"));
}

TEST_F(StreamBoundsTest, AStreamWithoutHeartbeatsIsClosedByTheIdleTimeout) {
  ServerOptions options;
  options.controller.stream_idle_timeout = absl::Seconds(60);
  Start(options);
  std::unique_ptr<LoopbackAgent> agent = Agent("node-0");
  ASSERT_TRUE(agent->Connect(Target(), absl::Seconds(20)).ok());
  ASSERT_TRUE(Connected("node-0"));
  clock_.Advance(absl::Seconds(61));  // Not a message, not a heartbeat.
  absl::StatusOr<grpc::Status> closed = agent->WaitClosed(absl::Seconds(60));
  ASSERT_TRUE(closed.ok()) << "the idle stream was never closed";
  EXPECT_EQ(closed->error_code(), grpc::StatusCode::UNAVAILABLE) << closed->error_message();
  EXPECT_NE(closed->error_message().find("stream_idle_timeout"), std::string::npos);
  EXPECT_FALSE(Connected("node-0"));
  EXPECT_EQ(Counter(metrics::kStreamIdleTimeouts.name, {}), 1);
  ASSERT_TRUE(agent->Connect(Target(), absl::Seconds(20)).ok());
  EXPECT_TRUE(Connected("node-0"));
}

TEST_F(StreamBoundsTest, StreamsBeyondThePeersLimitAreRefused) {
  ServerOptions options;
  options.controller.resource_limits.max_streams_per_peer = 2;
  Start(options);
  std::unique_ptr<LoopbackAgent> a = Agent("node-0");
  std::unique_ptr<LoopbackAgent> b = Agent("node-1");
  std::unique_ptr<LoopbackAgent> c = Agent("node-2");
  ASSERT_TRUE(a->Connect(Target(), absl::Seconds(20)).ok());
  ASSERT_TRUE(b->Connect(Target(), absl::Seconds(20)).ok());
  EXPECT_FALSE(c->Connect(Target(), absl::Seconds(20)).ok());
  absl::StatusOr<grpc::Status> refused = c->WaitClosed(absl::Seconds(20));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused->error_message().find("max_streams_per_peer"), std::string::npos)
      << refused->error_message();
  EXPECT_NE(refused->error_message().find("127.0.0.1"), std::string::npos);
  EXPECT_FALSE(Connected("node-2"));
  // A watch counts too.
  auto control = falcon::v1::Control::NewStub(
      grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    auto reader = control->WatchEvents(&ctx, falcon::v1::WatchEventsRequest());
    falcon::v1::Event e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  EXPECT_EQ(Counter(metrics::kLimitRefusals.name, {{"limit", "max_streams_per_peer"}}), 2);
  // Once a stream ends, another is admitted.
  a->Close();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  bool admitted = false;
  while (!admitted && absl::Now() < deadline) {
    admitted = c->Connect(Target(), absl::Seconds(20)).ok();
    if (!admitted) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(admitted);
}

TEST(PeerHostTest, DropsThePort) {
  EXPECT_EQ(service::PeerHost("ipv4:10.0.0.7:51234"), "ipv4:10.0.0.7");
  EXPECT_EQ(service::PeerHost("ipv6:[::1]:51234"), "ipv6:[::1]");
  EXPECT_EQ(service::PeerHost("unix:/run/falcon.sock"), "unix:/run/falcon.sock");
  EXPECT_EQ(service::PeerHost("ipv4:"), "ipv4:");
}

}  // namespace
}  // namespace falcon::controller::service
