// End-to-end tests of the agent over real sockets: shims on the unix socket (ShimTestClient), a
// controller on loopback (FakeController), /metrics over HTTP.
#include "agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics_table.h"
#include "agent/testing/fake_controller.h"
#include "agent/testing/messages.h"
#include "agent/testing/prometheus_text.h"
#include "agent/testing/shim_test_client.h"
#include "common/clock.h"
#include "common/telemetry_batch.h"
#include "common/testing/http_get.h"
#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

using testing::CommMsg;
using testing::FakeController;
using testing::FakeControllerStore;
using testing::HelloMsg;
using testing::HintMsg;
using testing::IterationOpsMsg;
using testing::kDpComm;
using testing::ShimTestClient;

constexpr char kJob[] = "job-a";
constexpr absl::Duration kWait = absl::Seconds(30);

// (rank, iteration) -> how many stored batches carry that summary.
std::map<std::pair<uint32_t, int64_t>, int> SummaryCounts(const FakeControllerStore& store) {
  std::map<std::pair<uint32_t, int64_t>, int> counts;
  for (const v1::TelemetryBatch& b : store.Batches("agent-n1")) {
    for (const v1::IterationSummary& s : b.iterations()) counts[{s.rank(), s.iteration()}]++;
  }
  return counts;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-agent-test-XXXXXX";  // Short: unix socket paths are limited.
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(controller_.Start().ok());
  }
  void TearDown() override {
    agent_.reset();
    controller_.Kill();
    std::filesystem::remove_all(dir_);
  }

  void StartAgent(const std::function<void(AgentOptions&)>& tweak = nullptr) {
    AgentOptions o;
    o.plaintext = true;  // Loopback (docs/operations.md#tls).
    o.controller = controller_.address();
    o.socket_path = dir_ + "/agent.sock";
    o.node = "n1";
    o.agent_id = "agent-n1";
    o.metrics_listen = "127.0.0.1:0";
    o.version = "test-1";
    o.summary_interval = absl::Milliseconds(20);
    o.heartbeat_interval = absl::Milliseconds(200);
    o.backoff.initial = absl::Milliseconds(20);
    o.backoff.max = absl::Milliseconds(200);
    if (tweak) tweak(o);
    auto agent = Agent::Start(o, clock_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
  }

  // A shim client for `rank` of kJob (2 ranks, DP comm {0, 1}) after hello + communicator.
  std::unique_ptr<ShimTestClient> Attach(uint32_t rank, int32_t pid, uint64_t* acked = nullptr) {
    auto c = std::make_unique<ShimTestClient>(agent_->options().socket_path);
    EXPECT_TRUE(c->Send(HelloMsg(kJob, rank, 2, pid)));
    auto welcome = c->Next(v1::AgentToShim::kWelcome);
    EXPECT_TRUE(welcome.has_value());
    if (acked != nullptr && welcome.has_value()) *acked = welcome->welcome().acked_sequence();
    EXPECT_TRUE(c->Send(CommMsg(kDpComm, {0, 1})));
    return c;
  }

  // Sends iterations [from, to) of `rank`, one op batch each (sequence = iteration + 1).
  static void SendIterations(ShimTestClient& c, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; ++i) {
      ASSERT_TRUE(c.Send(IterationOpsMsg(static_cast<uint64_t>(i) + 1, i)));
      ASSERT_TRUE(c.Send(HintMsg(i)));
    }
  }

  static uint64_t LastAck(ShimTestClient& c, uint64_t want) {
    uint64_t last = 0;
    while (last < want) {
      auto ack = c.Next(v1::AgentToShim::kOpBatchAck, kWait);
      if (!ack.has_value()) break;
      last = ack->op_batch_ack().sequence();
    }
    return last;
  }

  // Waits until the hub has handled everything sent on `c` so far (the hint after the last batch
  // too): a repeated, empty batch `acked` (the last acknowledged) is acknowledged again once the
  // messages ahead of it on the stream are handled (counted as a duplicate).
  static bool Barrier(ShimTestClient& c, uint64_t acked) {
    v1::ShimMessage barrier;
    barrier.mutable_op_batch()->set_sequence(acked);
    return c.Send(barrier) && c.Next(v1::AgentToShim::kOpBatchAck, kWait).has_value();
  }

  // Polls `done` every 5 ms for up to kWait.
  static bool WaitUntil(const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + kWait;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  std::string dir_;
  common::RealClock clock_;
  FakeControllerStore store_;
  FakeController controller_{&store_};
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, ControllerKilledAndRestartedMidStreamLosesAndDuplicatesNoSummary) {
  StartAgent();
  ASSERT_TRUE(agent_->link().WaitConnected(kWait));
  auto r0 = Attach(0, 100);
  auto r1 = Attach(1, 101);

  SendIterations(*r0, 0, 60);
  SendIterations(*r1, 0, 60);
  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return SummaryCounts(s).size() >= 110; }, kWait));

  // The controller stores but stops acknowledging, then loses what it receives, then dies.
  controller_.set_ack(false);
  SendIterations(*r0, 60, 80);
  SendIterations(*r1, 60, 80);
  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return SummaryCounts(s).size() >= 150; }, kWait));
  controller_.set_store(false);
  SendIterations(*r0, 80, 100);
  SendIterations(*r1, 80, 100);
  EXPECT_EQ(LastAck(*r0, 100), 100u);  // Shims are served throughout.
  EXPECT_EQ(LastAck(*r1, 100), 100u);
  ASSERT_TRUE(Barrier(*r0, 100) && Barrier(*r1, 100));
  agent_->FlushNow();
  // Sent (and lost by the controller) before it dies.
  ASSERT_TRUE(WaitUntil([&] { return agent_->buffer().stats().unsent == 0; }));
  controller_.Kill();

  // Outage: summaries are buffered.
  SendIterations(*r0, 100, 200);
  SendIterations(*r1, 100, 200);
  EXPECT_EQ(LastAck(*r0, 200), 200u);
  EXPECT_EQ(LastAck(*r1, 200), 200u);
  agent_->FlushNow();
  EXPECT_FALSE(agent_->link().connected());
  EXPECT_GT(agent_->buffer().stats().batches, 0u);

  controller_.set_ack(true);
  controller_.set_store(true);
  ASSERT_TRUE(controller_.Start(controller_.port()).ok());
  SendIterations(*r0, 200, 300);
  SendIterations(*r1, 200, 300);
  EXPECT_EQ(LastAck(*r0, 300), 300u);
  EXPECT_EQ(LastAck(*r1, 300), 300u);
  ASSERT_TRUE(Barrier(*r0, 300) && Barrier(*r1, 300));  // Hints 299 handled before the drain.
  ASSERT_TRUE(agent_->Drain(kWait).ok());

  const auto counts = SummaryCounts(store_);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    for (int64_t i = 0; i < 300; ++i) {
      auto it = counts.find({rank, i});
      ASSERT_NE(it, counts.end()) << "lost: rank " << rank << " iteration " << i;
      EXPECT_EQ(it->second, 1) << "duplicated: rank " << rank << " iteration " << i;
    }
  }
  EXPECT_EQ(counts.size(), 600u);
  const auto stats = agent_->buffer().stats();
  EXPECT_GT(stats.resent_batches, 0u);  // What the controller lost was sent again.
  EXPECT_EQ(stats.dropped_batches, 0u);
  EXPECT_GE(agent_->link().stats().connects, 2u);
  // The second hello told the controller which batches the agent still held.
  const auto hellos = store_.Hellos();
  ASSERT_GE(hellos.size(), 2u);
  EXPECT_GT(hellos.back().first_unacked_sequence(), 0u);
  ASSERT_EQ(hellos.back().jobs_size(), 1);
  EXPECT_EQ(hellos.back().jobs(0).ranks_size(), 2);
}

TEST_F(AgentTest, SummariesCarryWaitAndTransferFromBothRanks) {
  StartAgent();
  auto r0 = Attach(0, 100);
  auto r1 = Attach(1, 101);
  SendIterations(*r0, 0, 5);
  SendIterations(*r1, 0, 5);
  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return SummaryCounts(s).size() >= 8; }, kWait));
  for (const v1::TelemetryBatch& b : store_.Batches("agent-n1")) {
    for (const v1::IterationSummary& s : b.iterations()) {
      EXPECT_EQ(s.iteration_time_ns(), testing::kIterationNs);
      EXPECT_EQ(s.compute_ns(), 7'000'000);
      ASSERT_EQ(s.comms_size(), 1);
      EXPECT_EQ(s.comms(0).busy_ns(), 3'000'000);
      EXPECT_EQ(s.comms(0).wait_ns(), 0);  // Both ranks started together.
      EXPECT_TRUE(s.from_hint());
    }
  }
}

TEST_F(AgentTest, IterationsFoundFromTheOpStreamWithoutHints) {
  StartAgent([](AgentOptions& o) { o.hub.reduce.rank.tracker.redetect_every = 128; });
  auto r0 = Attach(0, 100);
  ASSERT_TRUE(r0->Send(CommMsg(0xE0, {0, 1}, v1::COMM_KIND_PP)));
  // Each 12 ms iteration: a send and a receive on the pipeline comm, then a DP all-reduce.
  uint64_t seq = 1;
  for (int b = 0; b < 40; ++b) {
    v1::ShimMessage msg;
    v1::OpBatch* batch = msg.mutable_op_batch();
    batch->set_sequence(b + 1);
    for (int i = b * 10; i < (b + 1) * 10; ++i) {
      const int64_t t = i * 12'000'000LL;
      const struct {
        uint64_t comm;
        v1::OpKind kind;
        int32_t peer;
        int64_t offset;
      } ops[] = {{0xE0, v1::OP_KIND_SEND, 1, 1'000'000},
                 {0xE0, v1::OP_KIND_RECV, 1, 3'000'000},
                 {kDpComm, v1::OP_KIND_ALL_REDUCE, -1, 8'000'000}};
      for (const auto& op : ops) {
        v1::OpRecord* r = batch->add_records();
        r->set_comm_id(op.comm);
        r->set_op_kind(op.kind);
        r->set_peer(op.peer);
        r->set_host_start_ns(t + op.offset);
        r->set_host_end_ns(t + op.offset + 1'000'000);
        r->set_seq(seq++);
        r->set_iteration(-1);
      }
    }
    ASSERT_TRUE(r0->Send(msg));
  }
  ASSERT_EQ(LastAck(*r0, 40), 40u);
  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return SummaryCounts(s).size() >= 300; }, kWait));
  int64_t expected = 0;
  for (const v1::TelemetryBatch& b : store_.Batches("agent-n1")) {
    for (const v1::IterationSummary& s : b.iterations()) {
      EXPECT_EQ(s.iteration(), expected++);
      EXPECT_FALSE(s.from_hint());
      EXPECT_EQ(s.iteration_time_ns(), 12'000'000);
      EXPECT_EQ(s.compute_ns(), 9'000'000);
      EXPECT_EQ(s.comms_size(), 2);
    }
  }
}

TEST_F(AgentTest, ShimDisconnectsAndReconnects) {
  StartAgent();
  uint64_t acked = 99;
  auto r0 = Attach(0, 100, &acked);
  EXPECT_EQ(acked, 0u);
  SendIterations(*r0, 0, 10);
  ASSERT_EQ(LastAck(*r0, 10), 10u);
  EXPECT_TRUE(r0->Close().ok());
  r0.reset();

  auto again = Attach(0, 100, &acked);
  EXPECT_EQ(acked, 10u);                             // The agent holds everything up to 10.
  ASSERT_TRUE(again->Send(IterationOpsMsg(10, 9)));  // An unacked resend: deduplicated.
  auto ack = again->Next(v1::AgentToShim::kOpBatchAck);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->op_batch_ack().sequence(), 10u);
  SendIterations(*again, 10, 20);
  ASSERT_EQ(LastAck(*again, 20), 20u);
  EXPECT_EQ(agent_->hub().stats().duplicate_batches, 1u);
  again.reset();

  uint64_t fresh = 99;
  auto restarted = Attach(0, 200, &fresh);  // A new trainer process: a new rank session.
  EXPECT_EQ(fresh, 0u);
  restarted.reset();

  ASSERT_TRUE(agent_->Drain(kWait).ok());
  const auto counts = SummaryCounts(store_);
  for (int64_t i = 0; i < 20; ++i) {
    auto it = counts.find({0, i});
    ASSERT_NE(it, counts.end()) << i;
    EXPECT_EQ(it->second, 1) << i;
  }
}

TEST_F(AgentTest, MalformedShimMessageGetsAnErrorWhileOtherSessionsGoOn) {
  StartAgent();
  auto bad = Attach(0, 100);
  auto good = Attach(1, 101);
  v1::ShimMessage msg = IterationOpsMsg(1, 0);
  msg.mutable_op_batch()->mutable_records(0)->set_comm_id(0xBAD);
  ASSERT_TRUE(bad->Send(msg));
  auto error = bad->Next(v1::AgentToShim::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->error().field(), "op_batch.records[0].comm_id");
  EXPECT_NE(error->error().message().find("not registered"), std::string::npos);

  SendIterations(*good, 0, 5);
  EXPECT_EQ(LastAck(*good, 5), 5u);
  // The stream that erred stays open and keeps working.
  EXPECT_FALSE(bad->Ended());
  SendIterations(*bad, 0, 5);
  EXPECT_EQ(LastAck(*bad, 5), 5u);
  EXPECT_EQ(agent_->hub().stats().errors, 1u);
}

TEST_F(AgentTest, MetricsAreScrapedOverHttp) {
  StartAgent();
  ASSERT_TRUE(agent_->link().WaitConnected(kWait));
  auto r0 = Attach(0, 100);
  SendIterations(*r0, 0, 7);
  ASSERT_EQ(LastAck(*r0, 7), 7u);
  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return SummaryCounts(s).size() >= 6; }, kWait));
  // The controller stores a batch before its ack reaches the agent: wait for the ack.
  ASSERT_TRUE(WaitUntil([&] { return agent_->buffer().stats().acked_batches >= 1; }));
  agent_->FlushNow();

  auto body = common::testing::HttpGet(agent_->metrics_address(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  auto samples = testing::ParsePrometheusText(*body);
  ASSERT_TRUE(samples.ok()) << samples.status();
  const std::map<std::string, std::string> rank0{
      {"node", "n1"}, {"job", kJob}, {"rank", "0"}, {"gpu", "cpu"}};
  using testing::FindSample;
  EXPECT_EQ(FindSample(*samples, metric::kRecordsIn.name, rank0), 7);
  EXPECT_EQ(FindSample(*samples, metric::kIterations.name, rank0), 6);
  EXPECT_DOUBLE_EQ(*FindSample(*samples, metric::kIterationTime.name, rank0), 0.01);
  // 10 ms iterations with one 3 ms dp op each: 7 ms outside communication.
  auto compute = FindSample(*samples, "falcon_agent_compute_time_seconds", rank0);
  ASSERT_TRUE(compute.has_value());
  EXPECT_NEAR(*compute, 0.007, 1e-9);
  EXPECT_EQ(FindSample(*samples, "falcon_agent_op_duration_seconds_count",
                       {{"job", kJob}, {"comm_kind", "dp"}}),
            7);
  EXPECT_DOUBLE_EQ(*FindSample(*samples, "falcon_agent_op_duration_seconds_sum",
                               {{"job", kJob}, {"comm_kind", "dp"}}),
                   7 * 0.003);
  EXPECT_EQ(FindSample(*samples, metric::kControllerConnected.name, {{"node", "n1"}}), 1);
  EXPECT_EQ(FindSample(*samples, metric::kBuildInfo.name, {{"version", "test-1"}}), 1);
  EXPECT_EQ(FindSample(*samples, metric::kShimSessions.name), 1);
  EXPECT_TRUE(FindSample(*samples, metric::kBufferOccupancy.name).has_value());
  EXPECT_EQ(
      FindSample(*samples, "falcon_agent_records_out_total", {{"job", kJob}, {"type", "summary"}}),
      6);
  EXPECT_EQ(FindSample(*samples, "falcon_agent_records_dropped_total",
                       {{"job", kJob}, {"reason", "shim_ring"}}),
            0);
  EXPECT_GE(*FindSample(*samples, metric::kBatchesAcked.name), 1);
}

TEST_F(AgentTest, ControllerConfigChangesTheFlushInterval) {
  StartAgent();
  ASSERT_TRUE(controller_.WaitForAgent(kWait));
  v1::ControllerMessage msg;
  msg.mutable_config()->set_summary_interval_ns(1);  // Out of range: ignored.
  ASSERT_TRUE(controller_.Send(msg));
  // A directive for a job not on this node is ignored and counted; the stream is ordered, so
  // once it is counted the config before it was handled.
  msg.Clear();
  msg.mutable_directive()->set_directive_id(1);
  msg.mutable_directive()->set_job("elsewhere");
  ASSERT_TRUE(controller_.Send(msg));
  ASSERT_TRUE(store_.WaitFor(
      [&](const auto&) { return agent_->hub().stats().ignored_controller_messages == 1; }, kWait));
  EXPECT_EQ(agent_->summary_interval(), absl::Milliseconds(20));
  msg.Clear();
  msg.mutable_config()->set_summary_interval_ns(5'000'000);
  ASSERT_TRUE(controller_.Send(msg));
  EXPECT_TRUE(store_.WaitFor(
      [&](const auto&) { return agent_->summary_interval() == absl::Milliseconds(5); }, kWait));
}

TEST_F(AgentTest, RelaysDirectivesTasksAndProfilingBothWays) {
  StartAgent();
  ASSERT_TRUE(controller_.WaitForAgent(kWait));
  auto r0 = Attach(0, 100);
  auto r1 = Attach(1, 101);
  SendIterations(*r0, 0, 1);
  ASSERT_EQ(LastAck(*r0, 1), 1u);

  v1::ControllerMessage msg;
  v1::Directive* d = msg.mutable_directive();
  d->set_directive_id(11);
  d->set_job(kJob);
  d->set_epoch(0);
  d->set_effective_iteration(50);
  d->add_target_ranks(1);
  d->set_plan_version(1);
  d->mutable_micro_batch_plan()->add_micro_batches(2);
  ASSERT_TRUE(controller_.Send(msg));
  auto got = r1->Next(v1::AgentToShim::kDirective);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->directive().directive_id(), 11u);
  v1::ShimMessage ack;
  ack.mutable_directive_ack()->set_directive_id(11);
  ack.mutable_directive_ack()->set_job(kJob);
  ack.mutable_directive_ack()->set_rank(1);
  ack.mutable_directive_ack()->set_status(v1::ACK_STATUS_RECEIVED);
  ack.mutable_directive_ack()->set_applied_iteration(-1);
  ASSERT_TRUE(r1->Send(ack));

  msg.Clear();
  v1::ValidationTask* t = msg.mutable_validation_task();
  t->set_task_id(21);
  t->set_job(kJob);
  t->add_ranks(0);
  t->mutable_gemm()->set_m(128);
  t->mutable_gemm()->set_n(128);
  t->mutable_gemm()->set_k(128);
  t->mutable_gemm()->set_repeats(1);
  ASSERT_TRUE(controller_.Send(msg));
  auto task = r0->Next(v1::AgentToShim::kValidationTask);
  ASSERT_TRUE(task.has_value());
  v1::ShimMessage result;
  result.mutable_validation_result()->set_task_id(21);
  result.mutable_validation_result()->set_job(kJob);
  result.mutable_validation_result()->set_rank(0);
  result.mutable_validation_result()->set_gemm_duration_ns(1234);
  ASSERT_TRUE(r0->Send(result));

  ASSERT_TRUE(store_.WaitFor([](const auto& s) { return s.Others().size() >= 2; }, kWait));
  // The ack (rank 1's stream) and the result (rank 0's stream) may reach the agent in either order.
  const auto others = store_.Others();
  const v1::AgentMessage* ack_out = nullptr;
  const v1::AgentMessage* result_out = nullptr;
  for (const v1::AgentMessage& m : others) {
    if (m.has_directive_ack()) ack_out = &m;
    if (m.has_validation_result()) result_out = &m;
  }
  ASSERT_NE(ack_out, nullptr);
  ASSERT_NE(result_out, nullptr);
  EXPECT_EQ(ack_out->directive_ack().directive_id(), 11u);
  EXPECT_EQ(ack_out->directive_ack().rank(), 1u);
  EXPECT_EQ(result_out->validation_result().gemm_duration_ns(), 1234);

  // Profiling: raw op records of rank 0 reach the controller only while it is on.
  msg.Clear();
  msg.mutable_profiling()->set_job(kJob);
  msg.mutable_profiling()->set_enabled(true);
  msg.mutable_profiling()->add_ranks(0);
  ASSERT_TRUE(controller_.Send(msg));
  ASSERT_TRUE(r0->Next(v1::AgentToShim::kProfiling).has_value());
  SendIterations(*r0, 1, 4);
  ASSERT_EQ(LastAck(*r0, 4), 4u);
  auto raw_ops = [](const FakeControllerStore& s) {
    int n = 0;
    for (const auto& b : s.Batches("agent-n1")) n += common::OpRecordCount(b);
    return n;
  };
  ASSERT_TRUE(store_.WaitFor([&](const auto& s) { return raw_ops(s) == 3; }, kWait));
  for (const auto& b : store_.Batches("agent-n1")) {
    EXPECT_EQ(b.ops_size(), 0);  // A node's ops go as RankOps.
    for (const v1::RankOps& ro : b.rank_ops()) EXPECT_EQ(ro.rank(), 0u);
  }
  // A peer transfer (NCCL's profiler plugin: the network part of iteration 3's all-reduce toward
  // rank 1) goes to the controller with the raw ops.
  v1::ShimMessage peer;
  peer.mutable_op_batch()->set_sequence(5);
  v1::OpRecord* rec = peer.mutable_op_batch()->add_records();
  rec->set_comm_id(kDpComm);
  rec->set_op_kind(v1::OP_KIND_PEER_SEND);
  rec->set_peer(1);
  rec->set_bytes(1 << 20);
  rec->set_host_start_ns(3 * testing::kIterationNs + 7'000'000);
  rec->set_host_end_ns(3 * testing::kIterationNs + 8'000'000);
  rec->set_device_duration_ns(900'000);
  rec->set_seq(5);
  rec->set_iteration(3);
  ASSERT_TRUE(r0->Send(peer));
  ASSERT_EQ(LastAck(*r0, 5), 5u);
  ASSERT_TRUE(store_.WaitFor([&](const auto& s) { return raw_ops(s) == 4; }, kWait));
  int peer_transfers = 0;
  for (const auto& b : store_.Batches("agent-n1")) {
    for (const v1::RankOps& ro : b.rank_ops()) {
      for (const v1::OpRecord& op : ro.ops()) {
        if (op.op_kind() != v1::OP_KIND_PEER_SEND) continue;
        ++peer_transfers;
        EXPECT_EQ(op.peer(), 1);
        EXPECT_EQ(op.device_duration_ns(), 900'000);
      }
    }
  }
  EXPECT_EQ(peer_transfers, 1);
}

TEST_F(AgentTest, SocketIsGroupAccessibleOnly) {
  StartAgent();
  struct stat st;
  ASSERT_EQ(stat(agent_->options().socket_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST_F(AgentTest, DrainWithoutControllerReportsUnackedBatches) {
  controller_.Kill();
  StartAgent();
  auto r0 = Attach(0, 100);
  SendIterations(*r0, 0, 3);
  ASSERT_EQ(LastAck(*r0, 3), 3u);
  absl::Status s = agent_->Drain(absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

}  // namespace
}  // namespace falcon::agent
