// The whole controller over gRPC on loopback, with RocksDB under $TEST_TMPDIR: five agents
// replay Alibaba PAI job 1 (10 ranks, worker 6 slowed down at index 181, recovered at 195) as
// real streams. Exactly one event, on rank 6, onset within 5 iterations of 181, recovery near
// 195; restarting the controller in the middle keeps that one event (agents reconnect, resend
// what was not acknowledged, and the controller deduplicates). Also: WatchEvents, GetHistory and
// a real scrape of /metrics.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/testing/http_get.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/controller_server.h"
#include "controller/testing/alibaba_data.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"
#include "proto/falcon/v1/control.grpc.pb.h"
#include "tests/real_data.h"

namespace falcon::controller {
namespace {

using testing::LoopbackAgent;

class LoopbackReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FALCON_REQUIRE_REAL_DATA();
    auto data = testing::LoadAlibabaJob(
        falcon::tests::RealDataPath("alibaba_pai_minibatch_time/job_1_norm.csv"));
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *data;
    spec_.job = "alibaba-job1";
    spec_.dp = 10;
    spec_.pp = 1;
    spec_.ranks_per_node = 2;
    for (const auto& [w, v] : data_) {
      std::vector<double> first(v.begin(), v.begin() + 50);
      std::sort(first.begin(), first.end());
      healthy_[w] = first[25];
    }
    options_.listen = "127.0.0.1:0";
    options_.metrics_listen = "127.0.0.1:0";
    options_.data_dir =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    options_.tick_interval = absl::Milliseconds(20);
    StartServer();
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      agents_.push_back(std::make_unique<LoopbackAgent>(
          testing::NodeName(n), testing::NodeName(n), testing::RanksOfNode(spec_, n),
          std::vector<falcon::v1::JobRegistration>{testing::NodeRegistration(spec_, n)}));
      ASSERT_TRUE(agents_.back()->Connect(Target(), absl::Seconds(10)).ok());
    }
  }
  void TearDown() override {
    agents_.clear();
    server_.reset();
  }

  void StartServer() {
    auto s = service::ControllerServer::Start(options_, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    control_ = falcon::v1::Control::NewStub(
        grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials()));
  }
  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->port()); }

  void SetResponders(size_t i) {
    testing::Responder responder;
    responder.gemm_ns = [this, i](uint32_t rank) {
      return static_cast<int64_t>(1e6 * data_[rank][i] / healthy_[rank]);
    };
    for (auto& a : agents_) a->set_responder(responder);
  }

  falcon::v1::Job GetJob() {
    grpc::ClientContext ctx;
    falcon::v1::GetJobRequest req;
    req.set_job(spec_.job);
    falcon::v1::Job job;
    EXPECT_TRUE(control_->GetJob(&ctx, req, &job).ok());
    return job;
  }

  void Round(size_t i) {
    SetResponders(i);
    for (auto& a : agents_) {
      falcon::v1::TelemetryBatch b;
      b.set_job(spec_.job);
      for (uint32_t r : a->ranks()) {
        *b.add_iterations() = testing::MakeSummary(spec_, r, static_cast<int64_t>(i),
                                                   static_cast<int64_t>(data_[r][i] * 1e6));
      }
      a->Send(b);
    }
    for (auto& a : agents_) ASSERT_TRUE(a->WaitAcked(absl::Seconds(20)).ok());
    // A paused job makes no progress: while the controller validates, the trainer waits.
    absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (GetJob().state() == falcon::v1::JOB_STATE_VALIDATING && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    clock_.Advance(absl::Milliseconds(data_[0][i]));
  }

  void Restart() {
    server_->Shutdown();
    server_.reset();
    StartServer();
    for (auto& a : agents_) ASSERT_TRUE(a->Connect(Target(), absl::Seconds(10)).ok());
  }

  std::vector<falcon::v1::Event> Events() {
    grpc::ClientContext ctx;
    falcon::v1::ListEventsResponse resp;
    EXPECT_TRUE(control_->ListEvents(&ctx, falcon::v1::ListEventsRequest(), &resp).ok());
    return std::vector<falcon::v1::Event>(resp.events().begin(), resp.events().end());
  }

  void ExpectOneEventOnRank6() {
    std::vector<falcon::v1::Event> events = Events();
    ASSERT_EQ(events.size(), 1u);
    const falcon::v1::Event& e = events[0];
    ASSERT_EQ(e.ranks_size(), 1) << e.DebugString();
    EXPECT_EQ(e.ranks(0), 6u);
    EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
    EXPECT_NEAR(e.onset_iteration(), 181, 5);
    EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED);
    EXPECT_NEAR(e.recovery_iteration(), 195, 5);
    for (auto& a : agents_) EXPECT_TRUE(a->rejected().empty());
  }

  testing::LayoutSpec spec_;
  std::map<int, std::vector<double>> data_;
  std::map<int, double> healthy_;
  common::FakeClock clock_;
  service::ServerOptions options_;
  std::unique_ptr<service::ControllerServer> server_;
  std::unique_ptr<falcon::v1::Control::Stub> control_;
  std::vector<std::unique_ptr<LoopbackAgent>> agents_;
};

TEST_F(LoopbackReplayTest, OneEventOnRank6WatchedHistoryAndMetrics) {
  // Watch every transition from the start.
  grpc::ClientContext watch_ctx;
  auto watch = control_->WatchEvents(&watch_ctx, falcon::v1::WatchEventsRequest());
  std::vector<falcon::v1::Event> watched;
  std::thread watcher([&] {
    falcon::v1::Event e;
    while (watch->Read(&e)) watched.push_back(e);
  });
  for (size_t i = 0; i < data_[0].size(); ++i) Round(i);
  ExpectOneEventOnRank6();

  grpc::ClientContext hctx;
  falcon::v1::GetHistoryRequest hreq;
  hreq.set_job(spec_.job);
  hreq.set_max_points(100);
  falcon::v1::GetHistoryResponse history;
  ASSERT_TRUE(control_->GetHistory(&hctx, hreq, &history).ok());
  EXPECT_EQ(history.points_size(), 100);
  EXPECT_EQ(history.events_size(), 1);

  auto body = common::testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_NE(
      body->find(absl::StrCat(metrics::kEvents.name, "{cause=\"compute\",state=\"recovered\"} 1")),
      std::string::npos)
      << *body;
  EXPECT_NE(body->find(metrics::kIngestBatches.name), std::string::npos);
  EXPECT_NE(body->find(absl::StrCat(metrics::kDetectionDelaySeconds.name, "_count 1")),
            std::string::npos);
  EXPECT_NE(body->find(absl::StrCat(metrics::kJobIterationTime.name, "{job=\"alibaba-job1\"}")),
            std::string::npos);

  watch_ctx.TryCancel();
  watcher.join();
  std::vector<falcon::v1::EventState> states;
  for (const auto& e : watched) states.push_back(e.state());
  EXPECT_NE(std::find(states.begin(), states.end(), falcon::v1::EVENT_STATE_CONFIRMED),
            states.end());
  EXPECT_NE(std::find(states.begin(), states.end(), falcon::v1::EVENT_STATE_LOCALIZED),
            states.end());
  ASSERT_FALSE(watched.empty());
  EXPECT_EQ(watched.back().state(), falcon::v1::EVENT_STATE_RECOVERED);
}

// The controller restarts at iteration 190: after the verdict (from profiling, at 189), while the
// event is still active (it recovers at 200). A restart during profiling would re-profile from
// 191, after rank 6's slow stretch in this data (x1.5-2.1 at 181-188, ~1.0 at 190-192): an
// honest UNKNOWN, not what this test is about.
TEST_F(LoopbackReplayTest, ControllerRestartMidReplayKeepsOneEvent) {
  for (size_t i = 0; i < data_[0].size(); ++i) {
    if (i == 190) {
      ASSERT_EQ(Events().size(), 1u);
      // The ranks' devices run at this iteration's speed (a validation GEMM answered now measures
      // it), as in Round.
      SetResponders(i);
      // Some batches are in flight and unacknowledged when the controller goes down.
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          *b.add_iterations() = testing::MakeSummary(spec_, r, static_cast<int64_t>(i),
                                                     static_cast<int64_t>(data_[r][i] * 1e6));
        }
        a->Send(b);
      }
      Restart();
      for (auto& a : agents_) ASSERT_TRUE(a->WaitAcked(absl::Seconds(20)).ok());
      continue;
    }
    Round(i);
  }
  ExpectOneEventOnRank6();
}

}  // namespace
}  // namespace falcon::controller
