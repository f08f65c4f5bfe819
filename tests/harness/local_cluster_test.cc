// LocalCluster with real binaries, without the trainer: everything comes up on loopback, the
// Control API answers, a restarted controller is reconnected by the agents, and Stop() leaves no
// process behind.
#include "tests/harness/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/http_get.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace falcon::tests::harness {
namespace {

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

// The /metrics page at HOST:PORT, or the error in its place.
std::string Scrape(const std::string& address) {
  absl::StatusOr<std::string> body = common::testing::HttpGet(address, "/metrics");
  return body.ok() ? *body : body.status().ToString();
}

absl::Status ListJobs(LocalCluster& cluster) {
  auto stub = cluster.NewControlStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  falcon::v1::ListJobsRequest req;
  falcon::v1::ListJobsResponse resp;
  grpc::Status s = stub->ListJobs(&ctx, req, &resp);
  return s.ok() ? absl::OkStatus() : absl::UnavailableError(s.error_message());
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

}  // namespace
}  // namespace falcon::tests::harness
