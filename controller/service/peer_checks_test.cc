// Peer checks over real gRPC on loopback (docs/operations.md#peer-checks): each forgery an
// authenticated peer could try against a live job is refused, names the field and the peer, is
// counted in falcon_controller_peer_refusals_total{check}, and leaves the live job, its event and
// its directives as they were: a hello reusing a live agent's id; a registration raising the
// job's epoch to 2^64-1 (or by one, from an agent without a part in the job); a hello claiming a
// first_unacked_sequence far beyond what the controller has seen; validation results and
// directive acks for ranks the sender's shims do not hold.
#include <prometheus/registry.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/series_value.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/controller_server.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/loopback_agent.h"
#include "gtest/gtest.h"

namespace falcon::controller::service {
namespace {

using testing::LoopbackAgent;

// What a forgery must leave untouched.
struct Snapshot {
  std::string job;         // The job record, serialized.
  std::string event;       // The active event, serialized ("" when none).
  std::string directives;  // The job's directive records, serialized in order.
  bool connected = false;  // Whether the victim's stream is still the agent's.

  bool operator==(const Snapshot& o) const {
    return job == o.job && event == o.event && directives == o.directives &&
           connected == o.connected;
  }
};

class PeerChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.ranks_per_node = 4;  // The whole job on node-0.
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.tick_interval = absl::Milliseconds(20);
    // Loopback agents send no heartbeats: no idle timeout while the fake clock jumps.
    options.controller.stream_idle_timeout = absl::InfiniteDuration();
    auto s = ControllerServer::Start(options, &clock_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  std::string Target() const { return absl::StrCat("127.0.0.1:", server_->port()); }

  // The job's one agent, connected; its shims hold the job paused and answer nothing, so that
  // its event stands still while the forgeries come.
  std::unique_ptr<LoopbackAgent> Victim() {
    testing::Responder responder;
    responder.ack_directives = false;
    responder.answer_tasks = false;
    auto agent = std::make_unique<LoopbackAgent>(
        "node-0", "node-0", testing::RanksOfNode(spec_, 0),
        std::vector<falcon::v1::JobRegistration>{testing::NodeRegistration(spec_, 0)});
    agent->set_responder(responder);
    absl::Status s = agent->Connect(Target(), absl::Seconds(20));
    EXPECT_TRUE(s.ok()) << s;
    return agent;
  }

  Snapshot Take() {
    Snapshot snap;
    server_->RunOnLoop([&](Controller& c) {
      if (const registry::JobEntry* job = c.registry().Find(spec_.job)) {
        snap.job = job->record().SerializeAsString();
      }
      if (const auto* e = c.events().Active(spec_.job)) snap.event = e->event().SerializeAsString();
      for (const auto& d : c.directives().List(spec_.job, 1000)) {
        snap.directives += d.SerializeAsString();
      }
      snap.connected = c.hub().IsConnected("node-0");
    });
    return snap;
  }

  double Refusals(const char* check) {
    return common::testing::SeriesValue(server_->registry().Collect(), metrics::kPeerRefusals.name,
                                        {{"check", check}})
        .value_or(-1);
  }
  // Waits (up to a minute) until `check` counted `n` refusals.
  bool WaitRefusals(const char* check, double n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (Refusals(check) < n) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return Refusals(check) == n;
  }

  // Connects `forger` expecting the controller to refuse its hello; returns the final status.
  grpc::Status Refused(LoopbackAgent* forger) {
    EXPECT_FALSE(forger->Connect(Target(), absl::Seconds(20)).ok());
    absl::StatusOr<grpc::Status> closed = forger->WaitClosed(absl::Seconds(20));
    EXPECT_TRUE(closed.ok());
    return closed.ok() ? *closed : grpc::Status::OK;
  }

  uint64_t ForceValidation() {
    uint64_t id = 0;
    server_->RunOnLoop([&](Controller& c) {
      absl::StatusOr<uint64_t> forced = c.ForceValidation(spec_.job);
      ASSERT_TRUE(forced.ok()) << forced.status();
      id = *forced;
    });
    return id;
  }

  testing::LayoutSpec spec_;
  common::FakeClock clock_;
  std::unique_ptr<ControllerServer> server_;
};

void ExpectNames(const grpc::Status& s, const std::string& field) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("peer ipv4:127.0.0.1:"), std::string::npos) << s.error_message();
}

TEST_F(PeerChecksTest, AnEmptyHelloCannotTakeALiveAgentsId) {
  std::unique_ptr<LoopbackAgent> victim = Victim();
  const uint64_t event = ForceValidation();
  ASSERT_GT(event, 0u);
  const Snapshot before = Take();
  ASSERT_TRUE(before.connected);
  ASSERT_FALSE(before.event.empty());

  LoopbackAgent forger("node-0", "node-0", {}, {});
  const grpc::Status refused = Refused(&forger);
  ExpectNames(refused, "hello.agent_id");
  EXPECT_NE(refused.error_message().find("agent 'node-0' is live on another stream"),
            std::string::npos)
      << refused.error_message();
  EXPECT_EQ(Refusals(metrics::check::kAgentIdLive), 1);
  EXPECT_TRUE(Take() == before);

  // The job does not end after the grace: its agent never went away.
  clock_.Advance(ControllerOptions().job_end_grace + absl::Seconds(1));
  server_->RunOnLoop([](Controller& c) { c.Tick(); });
  server_->RunOnLoop([&](Controller& c) {
    EXPECT_NE(c.registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
    ASSERT_NE(c.events().Active(spec_.job), nullptr);
    EXPECT_EQ(c.events().Active(spec_.job)->event().event_id(), event);
  });

  // Once the live stream is gone, the id may connect again.
  victim->Close();
  LoopbackAgent again("node-0", "node-0", testing::RanksOfNode(spec_, 0),
                      {testing::NodeRegistration(spec_, 0)});
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  bool admitted = false;
  while (!admitted && absl::Now() < deadline) {
    admitted = again.Connect(Target(), absl::Seconds(20)).ok();
    if (!admitted) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(admitted);
}

TEST_F(PeerChecksTest, AnotherAgentCannotRaiseALiveJobsEpoch) {
  std::unique_ptr<LoopbackAgent> victim = Victim();
  ForceValidation();
  const Snapshot before = Take();

  // 2^64-1 in a hello: beyond any step a restart makes.
  falcon::v1::JobRegistration huge = testing::NodeRegistration(spec_, 0);
  huge.set_epoch(std::numeric_limits<uint64_t>::max());
  LoopbackAgent forger("node-9", "node-9", testing::RanksOfNode(spec_, 0), {huge});
  const grpc::Status refused = Refused(&forger);
  ExpectNames(refused, "hello.jobs[0].epoch");
  EXPECT_NE(refused.error_message().find("by more than 1024"), std::string::npos)
      << refused.error_message();

  // One step up, from an agent with no part in the job while its agent reports it.
  falcon::v1::JobRegistration next = testing::NodeRegistration(spec_, 0);
  next.set_epoch(spec_.epoch + 1);
  LoopbackAgent stepper("node-9", "node-9", testing::RanksOfNode(spec_, 0), {next});
  const grpc::Status refused_step = Refused(&stepper);
  ExpectNames(refused_step, "hello.jobs[0].epoch");
  EXPECT_NE(refused_step.error_message().find("while agent 'node-0' reports it"), std::string::npos)
      << refused_step.error_message();

  // The same in a batch's registration: the batch is rejected with the field.
  LoopbackAgent batcher("node-9", "node-9", {}, {});
  ASSERT_TRUE(batcher.Connect(Target(), absl::Seconds(20)).ok());
  falcon::v1::TelemetryBatch batch;
  batch.set_job(spec_.job);
  *batch.mutable_registration() = huge;
  batcher.Send(batch);
  ASSERT_TRUE(batcher.WaitAcked(absl::Seconds(20)).ok());
  ASSERT_EQ(batcher.rejected().size(), 1u);
  EXPECT_EQ(batcher.rejected()[0].error().field(), "batch.registration.epoch");
  EXPECT_NE(batcher.rejected()[0].error().message().find("PERMISSION_DENIED"), std::string::npos);

  EXPECT_EQ(Refusals(metrics::check::kEpoch), 3);
  EXPECT_TRUE(Take() == before);
  // The job's own agent still raises its epoch when the job restarts.
  falcon::v1::TelemetryBatch restart;
  restart.set_job(spec_.job);
  *restart.mutable_registration() = next;
  victim->Send(restart);
  ASSERT_TRUE(victim->WaitAcked(absl::Seconds(20)).ok());
  EXPECT_TRUE(victim->rejected().empty());
  server_->RunOnLoop(
      [&](Controller& c) { EXPECT_EQ(c.registry().Find(spec_.job)->epoch(), spec_.epoch + 1); });
}

TEST_F(PeerChecksTest, AHelloCannotClaimSequencesFarBeyondWhatWasSeen) {
  std::unique_ptr<LoopbackAgent> victim = Victim();
  for (int64_t it = 1; it <= 3; ++it) {
    falcon::v1::TelemetryBatch batch;
    batch.set_job(spec_.job);
    for (uint32_t r : victim->ranks()) {
      *batch.add_iterations() = testing::MakeSummary(spec_, r, it, 100'000'000);
    }
    victim->Send(batch);
  }
  ASSERT_TRUE(victim->WaitAcked(absl::Seconds(20)).ok());
  victim->Close();  // Gone: the id is free, and the controller knows its sequences (1..3).
  const Snapshot before = Take();

  // A raw hello with first_unacked_sequence 2^63.
  auto stub = falcon::v1::Telemetry::NewStub(
      grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  falcon::v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("node-0");
  hello.mutable_hello()->set_node("node-0");
  hello.mutable_hello()->set_first_unacked_sequence(uint64_t{1} << 63);
  stream->Write(hello);
  falcon::v1::ControllerMessage reply;
  EXPECT_FALSE(stream->Read(&reply)) << "the controller answered the forged hello";
  ExpectNames(stream->Finish(), "hello.first_unacked_sequence");
  EXPECT_EQ(Refusals(metrics::check::kFirstUnackedSequence), 1);
  EXPECT_TRUE(Take() == before);

  // The agent's later batches are still applied.
  ASSERT_TRUE(victim->Connect(Target(), absl::Seconds(20)).ok());
  EXPECT_EQ(victim->hello_acked_sequence(), 3u);
  falcon::v1::TelemetryBatch batch;
  batch.set_job(spec_.job);
  for (uint32_t r : victim->ranks()) {
    *batch.add_iterations() = testing::MakeSummary(spec_, r, 4, 100'000'000);
  }
  EXPECT_EQ(victim->Send(batch), 4u);
  ASSERT_TRUE(victim->WaitAcked(absl::Seconds(20)).ok());
  server_->RunOnLoop([&](Controller& c) { EXPECT_EQ(c.detection().LastIteration(spec_.job), 4); });
}

TEST_F(PeerChecksTest, ResultsAndAcksFromAnotherSessionAreDropped) {
  std::unique_ptr<LoopbackAgent> victim = Victim();
  ForceValidation();
  const Snapshot before = Take();
  ASSERT_FALSE(before.directives.empty()) << "the validation's pause directive";

  LoopbackAgent forger("node-9", "node-9", {}, {});
  ASSERT_TRUE(forger.Connect(Target(), absl::Seconds(20)).ok());
  int sent = 0;
  for (uint64_t id = 1; id <= 10; ++id) {
    for (uint32_t rank = 0; rank < 4; ++rank) {
      falcon::v1::AgentMessage result;
      falcon::v1::ValidationResult* r = result.mutable_validation_result();
      r->set_task_id(id);
      r->set_job(spec_.job);
      r->set_rank(rank);
      r->set_gemm_duration_ns(rank == 0 ? 10'000'000 : 1'000'000);  // Rank 0 "10x slower".
      r->set_gemm_flops(1e12);
      falcon::v1::AgentMessage ack;
      falcon::v1::DirectiveAck* a = ack.mutable_directive_ack();
      a->set_directive_id(id);
      a->set_job(spec_.job);
      a->set_rank(rank);
      a->set_epoch(spec_.epoch);
      a->set_status(falcon::v1::ACK_STATUS_REJECTED);
      a->set_reason("forged");
      ASSERT_TRUE(forger.SendRaw(result));
      ASSERT_TRUE(forger.SendRaw(ack));
      ++sent;
    }
  }
  EXPECT_TRUE(WaitRefusals(metrics::check::kValidationResultRank, sent));
  EXPECT_TRUE(WaitRefusals(metrics::check::kDirectiveAckRank, sent));
  EXPECT_TRUE(Take() == before);
}

TEST_F(PeerChecksTest, BatchesOfAnotherAgentsRanksAreRefused) {
  std::unique_ptr<LoopbackAgent> victim = Victim();
  const Snapshot before = Take();
  LoopbackAgent forger("node-9", "node-9", {}, {});
  ASSERT_TRUE(forger.Connect(Target(), absl::Seconds(20)).ok());
  // A summary of the victim's rank 0 far ahead (it would make the real ones stale), and op
  // records of its rank 2.
  falcon::v1::TelemetryBatch summary;
  summary.set_job(spec_.job);
  *summary.add_iterations() = testing::MakeSummary(spec_, 0, 1000, 100'000'000);
  forger.Send(summary);
  falcon::v1::TelemetryBatch ops;
  ops.set_job(spec_.job);
  ops.add_rank_ops()->set_rank(2);
  forger.Send(ops);
  EXPECT_TRUE(WaitRefusals(metrics::check::kBatchRank, 2));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (forger.rejected().size() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const std::vector<falcon::v1::BatchAck> rejected = forger.rejected();
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0].error().field(), "batch.iterations[0].rank");
  EXPECT_NE(rejected[0].error().message().find("held by agent 'node-0'"), std::string::npos)
      << rejected[0].error().message();
  EXPECT_EQ(rejected[1].error().field(), "batch.rank_ops[0].rank");
  // Nor can it take rank 0 by registering it at the job's epoch alongside its summary.
  falcon::v1::TelemetryBatch takeover = summary;
  falcon::v1::JobRegistration* reg = takeover.mutable_registration();
  *reg = testing::NodeRegistration(spec_, 0);
  for (auto& r : *reg->mutable_ranks()) r.set_node("node-9");
  forger.Send(takeover);
  EXPECT_TRUE(WaitRefusals(metrics::check::kBatchRank, 3));
  while (forger.rejected().size() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(forger.rejected().size(), 3u);
  EXPECT_EQ(forger.rejected()[2].error().field(), "batch.registration.ranks[0].rank");
  EXPECT_TRUE(Take() == before);
  // The victim's own summaries still count: iteration 5 is not stale.
  falcon::v1::TelemetryBatch own;
  own.set_job(spec_.job);
  *own.add_iterations() = testing::MakeSummary(spec_, 0, 5, 100'000'000);
  victim->Send(own);
  ASSERT_TRUE(victim->WaitAcked(absl::Seconds(20)).ok());
  EXPECT_TRUE(victim->rejected().empty());
  EXPECT_EQ(common::testing::SeriesValue(server_->registry().Collect(),
                                         metrics::kIngestStaleSummaries.name, {}),
            0.0);
}

}  // namespace
}  // namespace falcon::controller::service
