// Replays real data through the whole controller pipeline, in process (no gRPC): Alibaba PAI
// job 1 (../shared/real_data/alibaba_pai_minibatch_time) as the iteration times of 10 ranks on 5
// simulated agents. Worker 6 slows down at index 181 (x1.54) and recovers at 195 (labels.json).
// Expected: exactly one event, on rank 6, onset within 5 iterations of 181, a compute verdict
// (the simulated GEMM of a rank runs as much slower as its iteration time), recovery near 195;
// with a controller restart in the middle of the event, the same single event.
#include <prometheus/registry.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "controller/control_api.h"
#include "controller/controller.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/testing/alibaba_data.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/sim_agent.h"
#include "gtest/gtest.h"
#include "tests/real_data.h"

namespace falcon::controller {
namespace {

using testing::LayoutSpec;
using testing::SimAgent;

class AlibabaReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FALCON_REQUIRE_REAL_DATA();
    auto data = testing::LoadAlibabaJob(
        falcon::tests::RealDataPath("alibaba_pai_minibatch_time/job_1_norm.csv"));
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *data;
    ASSERT_EQ(data_.size(), 10u);
    spec_.job = "alibaba-job1";
    spec_.dp = 10;
    spec_.pp = 1;
    spec_.ranks_per_node = 2;
    for (const auto& [w, v] : data_) {
      std::vector<double> first(v.begin(), v.begin() + 50);
      std::sort(first.begin(), first.end());
      healthy_[w] = first[25];
    }
    kv_ = std::make_unique<store::InMemoryKvStore>(store::ControllerStore::TableNames());
    metrics_ = std::make_unique<metrics::ControllerMetrics>(registry_, "test");
    Start();
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      agents_.push_back(std::make_unique<SimAgent>(testing::NodeName(n), testing::NodeName(n),
                                                   testing::RanksOfNode(spec_, n)));
      ASSERT_TRUE(agents_.back()->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
    }
  }

  void Start() {
    ControllerOptions options;
    auto c = Controller::Create(options, kv_.get(), &clock_, metrics_.get());
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
  }

  // One round: every agent sends iteration i of its ranks (and raw ops while profiled), then
  // answers what the controller asked.
  void Round(size_t i) {
    testing::Responder responder;
    responder.gemm_ns = [this, i](uint32_t rank) {
      return static_cast<int64_t>(1e6 * data_[rank][i] / healthy_[rank]);
    };
    for (auto& agent : agents_) {
      falcon::v1::TelemetryBatch batch;
      batch.set_job(spec_.job);
      for (uint32_t r : agent->ranks()) {
        *batch.add_iterations() = testing::MakeSummary(spec_, r, static_cast<int64_t>(i),
                                                       static_cast<int64_t>(data_[r][i] * 1e6));
      }
      auto ack = agent->Send(*c_, batch);
      ASSERT_TRUE(ack.ok()) << ack.status();
      ASSERT_FALSE(ack->has_error()) << ack->error().field() << ": " << ack->error().message();
      if (agent->profiling(spec_.job)) {
        for (uint32_t r : agent->ranks()) {
          falcon::v1::TelemetryBatch ops;
          ops.set_job(spec_.job);
          ops.set_op_rank(r);
          for (uint64_t k = 0; k < 4; ++k) {
            falcon::v1::OpRecord* op = ops.add_ops();
            op->set_comm_id(1000);
            op->set_op_kind(falcon::v1::OP_KIND_ALL_REDUCE);
            op->set_bytes(64 << 20);
            op->set_peer(-1);
            op->set_host_start_ns(static_cast<int64_t>(i) * 1'000'000'000 + k * 1000);
            op->set_host_end_ns(op->host_start_ns() + 500);
            op->set_device_duration_ns(400);
            op->set_seq(++op_seq_[r]);
            op->set_iteration(static_cast<int64_t>(i));
          }
          auto ops_ack = agent->Send(*c_, ops);
          ASSERT_TRUE(ops_ack.ok() && !ops_ack->has_error());
        }
      }
    }
    for (auto& agent : agents_) agent->Respond(*c_, responder);
    for (auto& agent : agents_) agent->Respond(*c_, responder);
    clock_.Advance(absl::Milliseconds(data_[0][i]));
  }

  void Restart() {
    for (auto& agent : agents_) agent->Disconnect(*c_);
    c_.reset();
    Start();
    for (uint32_t n = 0; n < agents_.size(); ++n) {
      ASSERT_TRUE(agents_[n]->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
      // Everything this agent sent was acknowledged, so nothing is resent.
      EXPECT_EQ(agents_[n]->hello().acked_sequence(), agents_[n]->last_sequence());
    }
  }

  void ExpectOneEventOnRank6() {
    ControlApi api(c_.get());
    falcon::v1::ListEventsRequest req;
    auto events = api.ListEvents(req);
    ASSERT_TRUE(events.ok());
    ASSERT_EQ(events->events_size(), 1);
    const falcon::v1::Event& e = events->events(0);
    if (getenv("FALCON_DEBUG")) std::cerr << e.DebugString();
    EXPECT_EQ(e.job(), spec_.job);
    EXPECT_TRUE(e.rank_level());
    EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
    ASSERT_EQ(e.ranks_size(), 1);
    EXPECT_EQ(e.ranks(0), 6u);
    EXPECT_NEAR(e.onset_iteration(), 181, 5);
    EXPECT_GE(e.alarm_iteration(), e.onset_iteration());
    EXPECT_GT(e.verdict_iteration(), e.alarm_iteration());
    EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_RECOVERED);
    EXPECT_NEAR(e.recovery_iteration(), 195, 5);
    EXPECT_NEAR(e.slowdown_ratio(), 1.54, 0.1);  // labels.json: 417 -> 644.
    EXPECT_GT(e.lost_seconds(), 0);
    std::vector<falcon::v1::EventState> states;
    for (const auto& t : e.transitions()) states.push_back(t.state());
    EXPECT_EQ(states.front(), falcon::v1::EVENT_STATE_SUSPECTED);
    EXPECT_EQ(states[1], falcon::v1::EVENT_STATE_CONFIRMED);
    EXPECT_NE(std::find(states.begin(), states.end(), falcon::v1::EVENT_STATE_LOCALIZED),
              states.end());
    EXPECT_EQ(states.back(), falcon::v1::EVENT_STATE_RECOVERED);
    // Profiling named rank 6 (x1.29 its stage's median in each profiled iteration): no
    // validation pause. The job is back to tracking; every directive was applied by every rank.
    EXPECT_TRUE(e.localized_from_profiling());
    auto job = api.GetJob([&] {
      falcon::v1::GetJobRequest r;
      r.set_job(spec_.job);
      return r;
    }());
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state(), falcon::v1::JOB_STATE_TRACKING);
    EXPECT_EQ(job->active_event_ids_size(), 0);
    EXPECT_EQ(job->last_iteration(), static_cast<int64_t>(data_[0].size()) - 1);
    for (const auto& d : c_->directives().List(spec_.job, 0)) {
      EXPECT_FALSE(d.directive().has_pause()) << d.DebugString();
      EXPECT_EQ(d.state(), falcon::v1::DirectiveRecord::STATE_APPLIED) << d.DebugString();
    }
  }

  LayoutSpec spec_;
  std::map<int, std::vector<double>> data_;
  std::map<int, double> healthy_;
  common::FakeClock clock_;
  prometheus::Registry registry_;
  std::unique_ptr<store::InMemoryKvStore> kv_;
  std::unique_ptr<metrics::ControllerMetrics> metrics_;
  std::unique_ptr<Controller> c_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::map<uint32_t, uint64_t> op_seq_;
};

TEST_F(AlibabaReplayTest, OneEventOnRank6WithComputeVerdictAndRecovery) {
  bool profiled = false;
  for (size_t i = 0; i < data_[0].size(); ++i) {
    Round(i);
    profiled = profiled || agents_[3]->profiling(spec_.job);
  }
  EXPECT_TRUE(profiled);
  ExpectOneEventOnRank6();
}

TEST_F(AlibabaReplayTest, RestartMidEventKeepsTheSingleEvent) {
  bool restarted = false;
  for (size_t i = 0; i < data_[0].size(); ++i) {
    Round(i);
    if (restarted) continue;
    // Restart in the middle of the event: right after its verdict, while it is still open.
    ControlApi api(c_.get());
    auto events = api.ListEvents({});
    ASSERT_TRUE(events.ok());
    if (events->events_size() == 0 || events->events(0).verdict_iteration() < 0) continue;
    ASSERT_EQ(events->events_size(), 1);
    ASSERT_EQ(events->events(0).state(), falcon::v1::EVENT_STATE_LOCALIZED);
    Restart();
    restarted = true;
  }
  EXPECT_TRUE(restarted);
  ExpectOneEventOnRank6();
}

}  // namespace
}  // namespace falcon::controller
