// Shim streaming to FakeAgent over a real unix-socket gRPC stream: order, agent restarts,
// bounds, shutdown, fork.
#include "trainer_shim/shim.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "trainer_shim/shim_test_util.h"

namespace falcon::trainer_shim {
namespace {

TEST_F(ShimTest, StreamsRecordsInOrderAfterHelloAndRegistration) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  CommunicatorInfo comm{kComm, CommKind::COMM_KIND_DP, {1, 3}, "dp0"};
  ASSERT_TRUE(shim->RegisterCommunicator(comm).ok());
  ASSERT_TRUE(shim->PollDirectives(7, nullptr).ok());  // Iteration 7 starts.
  RecordN(*shim, 0, 500);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 500; }));

  ASSERT_EQ(agent_->hellos().size(), 1u);
  const falcon::v1::ShimHello hello = agent_->hellos()[0];
  EXPECT_EQ(hello.job(), "job1");
  EXPECT_EQ(hello.rank().rank(), 1u);
  EXPECT_EQ(hello.rank().node(), "node-a");
  EXPECT_GT(hello.rank().pid(), 0);
  EXPECT_EQ(hello.world_size(), 4u);
  EXPECT_EQ(hello.epoch(), 5u);
  EXPECT_EQ(hello.version(), kShimVersion);

  ASSERT_EQ(agent_->communicators().size(), 1u);
  EXPECT_EQ(agent_->communicators()[0].comm_id(), kComm);
  EXPECT_EQ(agent_->communicators()[0].kind(), falcon::v1::COMM_KIND_DP);
  EXPECT_EQ(agent_->communicators()[0].member_ranks().size(), 2);

  std::vector<falcon::v1::OpRecord> got = agent_->records();
  ASSERT_EQ(got.size(), 500u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].seq(), i + 1);
    EXPECT_EQ(got[i].bytes(), 1000 + i);
    EXPECT_EQ(got[i].host_start_ns(), static_cast<int64_t>(10 * i));
    EXPECT_EQ(got[i].iteration(), 7) << "stamped with the polled iteration";
    EXPECT_EQ(got[i].peer(), i % 2 == 0 ? -1 : 2);
  }
  uint64_t last = 0;
  for (const auto& b : agent_->batches()) {
    EXPECT_EQ(b.sequence(), last + 1);
    EXPECT_LE(b.records_size(), 64);
    last = b.sequence();
  }
  Shim::Stats s = shim->stats();
  EXPECT_EQ(s.records_accepted, 500u);
  EXPECT_EQ(s.records_dropped_ring, 0u);
  EXPECT_TRUE(agent_->WaitFor([&] { return shim->stats().link.held_records == 0; }));
}

TEST_F(ShimTest, AgentKilledAndRestartedMidRunLosesNoAcceptedRecord) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(
      shim->RegisterCommunicator({kComm, CommKind::COMM_KIND_WORLD, {0, 1, 2, 3}, ""}).ok());

  // Phase 1: delivered and acked.
  RecordN(*shim, 0, 300);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 300; }));
  std::vector<falcon::v1::OpRecord> acked_by_first = agent_->acked_records();
  uint64_t last_acked_batch = 0;
  for (const auto& b : agent_->batches())
    last_acked_batch = std::max(last_acked_batch, b.sequence());

  // Phase 2: the agent receives but dies before acking.
  agent_->set_ack_batches(false);
  RecordN(*shim, 300, 300);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->records().size() == 600; }));
  agent_->Stop();
  agent_.reset();
  ASSERT_TRUE(WaitUntil([&] { return !shim->stats().link.connected; }));

  // Phase 3: training goes on while the agent is away.
  RecordN(*shim, 600, 300);

  // The agent restarts on the same socket, knowing nothing.
  auto restarted = FakeAgent::Start(socket_);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  agent_ = *std::move(restarted);
  ASSERT_TRUE(agent_->WaitFor([&] { return SeqSet(agent_->acked_records()).size() == 600; }));

  std::set<uint64_t> all = SeqSet(acked_by_first);
  for (uint64_t s : SeqSet(agent_->acked_records())) all.insert(s);
  ASSERT_EQ(all.size(), 900u);
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), 900u);
  EXPECT_GE(*SeqSet(agent_->records()).begin(), 301u) << "acked records are not resent";

  ASSERT_EQ(agent_->hellos().size(), 1u);
  EXPECT_EQ(agent_->hellos()[0].first_unacked_sequence(), last_acked_batch + 1);
  ASSERT_EQ(agent_->communicators().size(), 1u) << "registrations are replayed to a new agent";
  Shim::Stats s = shim->stats();
  EXPECT_EQ(s.records_accepted, 900u);
  EXPECT_GE(s.link.batches_resent, 1u);
  EXPECT_GE(s.link.connects, 2u);
  EXPECT_EQ(s.link.records_evicted, 0u);
  EXPECT_TRUE(log_.Contains("lost the agent"));
}

// With an agent that sends delivery acks, what it accepted but did not deliver survives its
// death: the shim resends those batches and hints to the next agent, and forgets only what a
// DeliveryAck covered.
TEST_F(ShimTest, AgentKilledBeforeDeliveringGetsItsUndeliveredDataResent) {
  agent_->Stop();
  FakeAgent::Options with_delivery;
  with_delivery.delivery_acks = true;
  auto first = FakeAgent::Start(socket_, with_delivery);
  ASSERT_TRUE(first.ok()) << first.status();
  agent_ = *std::move(first);
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(
      shim->RegisterCommunicator({kComm, CommKind::COMM_KIND_WORLD, {0, 1, 2, 3}, ""}).ok());

  auto run_iteration = [&](int64_t iteration) {
    ASSERT_TRUE(shim->PollDirectives(iteration, nullptr).ok());
    RecordN(*shim, 100 * iteration, 100);
    // Iteration i ends: everything recorded so far is sealed before its hint is sent.
    ASSERT_TRUE(WaitUntil([&] {
      return shim->stats().link.held_records >= static_cast<uint64_t>(100 * (iteration + 1));
    }));
    ASSERT_TRUE(agent_->WaitFor([&] {
      return agent_->acked_records().size() == static_cast<size_t>(100 * (iteration + 1));
    }));
    ASSERT_TRUE(
        shim->RecordIteration({iteration, 100 * iteration, 100 * iteration + 99, 1.0, 0}).ok());
    ASSERT_TRUE(agent_->WaitFor(
        [&] { return agent_->hints().size() == static_cast<size_t>(iteration + 1); }));
  };
  run_iteration(0);
  run_iteration(1);
  EXPECT_EQ(shim->stats().link.held_records, 200u) << "accepted, not delivered: still held";

  // The agent delivers iteration 0 (every batch of its records), then dies.
  uint64_t iteration0_through = 0;
  for (const auto& b : agent_->batches()) {
    bool only0 = true;
    for (const auto& r : b.records()) only0 = only0 && r.iteration() == 0;
    if (only0) iteration0_through = std::max(iteration0_through, b.sequence());
  }
  ASSERT_GT(iteration0_through, 0u);
  ASSERT_TRUE(agent_->SendDelivered(iteration0_through, 0));
  ASSERT_TRUE(WaitUntil([&] { return shim->stats().link.delivered_iteration == 0; }));
  EXPECT_EQ(shim->stats().link.held_records, 100u);
  agent_->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !shim->stats().link.connected; }));

  auto second = FakeAgent::Start(socket_, with_delivery);
  ASSERT_TRUE(second.ok()) << second.status();
  agent_ = *std::move(second);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 100; }));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 1; }));
  std::set<uint64_t> resent = SeqSet(agent_->acked_records());
  EXPECT_EQ(*resent.begin(), 101u);
  EXPECT_EQ(*resent.rbegin(), 200u);
  EXPECT_EQ(agent_->hints()[0].iteration(), 1) << "the delivered hint is not resent";
  ASSERT_EQ(agent_->hellos().size(), 1u);
  ASSERT_TRUE(agent_->hellos()[0].has_delivered_iteration());
  EXPECT_EQ(agent_->hellos()[0].delivered_iteration(), 0);
  EXPECT_EQ(agent_->hellos()[0].first_unacked_sequence(), iteration0_through + 1);
  const AgentLink::Stats s = shim->stats().link;
  EXPECT_EQ(s.records_evicted, 0u);
  EXPECT_EQ(s.records_evicted_accepted, 0u);
  EXPECT_EQ(s.hints_dropped, 0u);

  // Delivered by the new agent: released.
  ASSERT_TRUE(agent_->SendDelivered(shim->stats().link.last_sequence, 1));
  EXPECT_TRUE(WaitUntil([&] { return shim->stats().link.held_records == 0; }));
}

// The same agent reattached (its welcome names the hints it holds): only later hints are resent.
TEST_F(ShimTest, ReattachResendsOnlyTheHintsTheAgentDoesNotHold) {
  agent_->Stop();
  FakeAgent::Options with_delivery;
  with_delivery.delivery_acks = true;
  auto first = FakeAgent::Start(socket_, with_delivery);
  ASSERT_TRUE(first.ok());
  agent_ = *std::move(first);
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  for (int64_t i = 0; i < 3; ++i)
    ASSERT_TRUE(shim->RecordIteration({i, 10 * i, 10 * i + 9, 1, 0}).ok());
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 3; }));
  agent_->Stop();
  ASSERT_TRUE(WaitUntil([&] { return !shim->stats().link.connected; }));

  with_delivery.welcome_hinted_iteration = 1;
  auto again = FakeAgent::Start(socket_, with_delivery);
  ASSERT_TRUE(again.ok());
  agent_ = *std::move(again);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 1; }));
  EXPECT_EQ(agent_->hints()[0].iteration(), 2);
}

TEST_F(ShimTest, KeepsTheNewestRecordsWithinTheBoundWhileNoAgentListens) {
  agent_->Stop();
  agent_.reset();
  ShimOptions o = FastOptions(socket_, &log_);
  o.max_buffered_records = 256;
  auto created = Shim::Create(o);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<Shim> shim = *std::move(created);
  RecordN(*shim, 0, 1000);
  ASSERT_TRUE(WaitUntil([&] {
    const AgentLink::Stats l = shim->stats().link;
    return l.held_records + l.records_evicted == 1000;
  }));
  const AgentLink::Stats away = shim->stats().link;
  ASSERT_EQ(away.held_records + away.records_evicted, 1000u);
  EXPECT_LE(away.held_records, 256u);

  auto agent = FakeAgent::Start(socket_);
  ASSERT_TRUE(agent.ok());
  agent_ = *std::move(agent);
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->stats().link.held_records == 0; }));
  std::vector<falcon::v1::OpRecord> got = agent_->records();
  uint64_t dropped = 0;
  for (const auto& b : agent_->batches()) dropped += b.dropped_records();
  EXPECT_EQ(got.size() + dropped, 1000u) << "every record is either delivered or counted";
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().seq(), 1000u) << "the newest survive";
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i].seq(), got[i - 1].seq() + 1);
}

TEST_F(ShimTest, BadInputsAreRefusedAndShutdownFlushes) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  OpRecord bad = Op(1);
  bad.comm_id = 0;
  EXPECT_EQ(shim->RecordOp(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shim->RegisterCommunicator({kComm, CommKind::COMM_KIND_DP, {0, 2}, ""}).code(),
            absl::StatusCode::kInvalidArgument)
      << "this rank must be a member";
  EXPECT_EQ(shim->PollDirectives(-2, nullptr).code(), absl::StatusCode::kInvalidArgument);
  RecordN(*shim, 0, 100);
  shim->Shutdown();
  EXPECT_EQ(agent_->acked_records().size(), 100u) << "shutdown flushed what was accepted";
  EXPECT_EQ(shim->RecordOp(Op(1)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shim->PollDirectives(0, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shim->stats().records_rejected, 1u);
}

TEST_F(ShimTest, ShutdownInAForkedChildDoesNotHang) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  RecordN(*shim, 0, 10);
  common::SpawnOptions options;
  options.name = "forked shim";
  absl::StatusOr<common::Subprocess> child = common::Subprocess::SpawnFunction(options, [&] {
    shim->Shutdown();  // Must neither flush nor join the parent's threads.
    return shim->RecordOp(Op(1)).code() == absl::StatusCode::kFailedPrecondition ? 0 : 1;
  });
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<std::optional<common::ExitStatus>> ended = child->WaitFor(absl::Seconds(20));
  ASSERT_TRUE(ended.ok()) << ended.status();
  ASSERT_TRUE(ended->has_value()) << "the forked child hangs";
  EXPECT_TRUE((*ended)->success()) << (*ended)->ToString();
  RecordN(*shim, 10, 10);  // The parent's shim is unaffected.
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 20; }));
}

TEST_F(ShimTest, ConcurrentProducersAreSerializedWithoutLosingRecords) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        OpRecord r = Op(i);
        r.bytes = static_cast<uint64_t>(t) * 1'000'000 + i;  // Identifies the producer and op.
        while (shim->RecordOp(r).code() == absl::StatusCode::kResourceExhausted) {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(
      agent_->WaitFor([&] { return agent_->acked_records().size() == kThreads * kPerThread; }));
  std::vector<falcon::v1::OpRecord> got = agent_->acked_records();
  std::set<uint64_t> payloads;
  std::vector<int> last_per_thread(kThreads, -1);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].seq(), i + 1) << "one sequence across producers";
    payloads.insert(got[i].bytes());
    const int t = static_cast<int>(got[i].bytes() / 1'000'000);
    const int op = static_cast<int>(got[i].bytes() % 1'000'000);
    EXPECT_GT(op, last_per_thread[t]) << "each producer's records keep their order";
    last_per_thread[t] = op;
  }
  EXPECT_EQ(payloads.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST(ShimCreateTest, RejectsBadOptions) {
  ShimOptions o;
  o.job = "j";
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(Shim::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShimRingTest, FullRingDropsAndCountsWithoutBlocking) {
  ShimOptions o;
  o.job = "j";
  o.ring_capacity = 8;
  o.max_batch_records = 8;
  o.max_buffered_records = 8;
  o.flush_interval = absl::Seconds(10);  // The link thread drains rarely.
  auto shim = Shim::Create(o);
  ASSERT_TRUE(shim.ok());
  int refused = 0;
  for (int i = 0; i < 100; ++i) {
    if ((*shim)->RecordOp(Op(i)).code() == absl::StatusCode::kResourceExhausted) ++refused;
  }
  Shim::Stats s = (*shim)->stats();
  EXPECT_EQ(s.records_accepted + s.records_dropped_ring, 100u);
  EXPECT_EQ(s.records_dropped_ring, static_cast<uint64_t>(refused));
  // The link thread drains at most once (at its start) within its 10 s flush interval.
  EXPECT_GE(refused, 100 - 16);
}

}  // namespace
}  // namespace falcon::trainer_shim
