// End-to-end tests of Shim against FakeAgent over a real unix-socket gRPC stream.
#include "trainer_shim/shim.h"

#include <algorithm>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "trainer_shim/fake_agent.h"

namespace falcon::shim {
namespace {

using falcon::v1::ACK_STATUS_APPLIED;
using falcon::v1::ACK_STATUS_RECEIVED;
using falcon::v1::ACK_STATUS_REJECTED;
using falcon::v1::Directive;
using falcon::v1::DirectiveAck;

constexpr uint64_t kComm = 0x1234;

// Polls `predicate` every 5 ms for up to 20 s (for state the FakeAgent does not see).
bool WaitUntil(const std::function<bool()>& predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!predicate()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class LogSink {
 public:
  std::function<void(std::string_view)> Fn() {
    return [this](std::string_view m) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(m);
    };
  }
  bool Contains(const std::string& needle) const {
    absl::MutexLock lock(&mu_);
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_;
};

ShimOptions FastOptions(const std::string& socket, LogSink* log) {
  ShimOptions o;
  o.job = "job1";
  o.rank = 1;
  o.world_size = 4;
  o.node = "node-a";
  o.epoch = 5;
  o.dp_size = 2;
  o.global_micro_batches = 8;
  o.agent_socket = socket;
  o.flush_interval = absl::Milliseconds(2);
  o.reconnect_backoff.initial = absl::Milliseconds(5);
  o.reconnect_backoff.max = absl::Milliseconds(40);
  o.connect_timeout = absl::Milliseconds(500);
  o.max_batch_records = 64;
  o.log = log->Fn();
  return o;
}

OpRecord Op(int64_t i) {
  OpRecord r;
  r.comm_id = kComm;
  r.op_kind = (i % 2 == 0) ? OpKind::kAllReduce : OpKind::kSend;
  r.peer = (i % 2 == 0) ? -1 : 2;
  r.bytes = 1000 + static_cast<uint64_t>(i);
  r.host_start_ns = 10 * i;
  r.host_end_ns = 10 * i + 5;
  return r;
}

void RecordN(Shim& shim, int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; ++i) ASSERT_TRUE(shim.RecordOp(Op(i)).ok());
}

std::set<uint64_t> SeqSet(const std::vector<falcon::v1::OpRecord>& records) {
  std::set<uint64_t> out;
  for (const auto& r : records) out.insert(r.seq());
  return out;
}

bool HasAck(const FakeAgent& agent, uint64_t id, falcon::v1::AckStatus status) {
  for (const DirectiveAck& a : agent.acks()) {
    if (a.directive_id() == id && a.status() == status) return true;
  }
  return false;
}

DirectiveAck FindAck(const FakeAgent& agent, uint64_t id, falcon::v1::AckStatus status) {
  for (const DirectiveAck& a : agent.acks()) {
    if (a.directive_id() == id && a.status() == status) return a;
  }
  return DirectiveAck();
}

Directive BaseDirective(uint64_t id, uint64_t epoch, int64_t iteration) {
  Directive d;
  d.set_directive_id(id);
  d.set_job("job1");
  d.set_epoch(epoch);
  d.set_effective_iteration(iteration);
  d.set_plan_version(3);
  return d;
}

Directive Plan(uint64_t id, uint64_t epoch, int64_t iteration) {
  Directive d = BaseDirective(id, epoch, iteration);
  d.mutable_micro_batch_plan()->add_micro_batches(6);
  d.mutable_micro_batch_plan()->add_micro_batches(2);
  return d;
}

class ShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = TestSocketPath("agent.sock");
    auto agent = FakeAgent::Start(socket_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }
  std::unique_ptr<Shim> MakeShim(const Clock* clock = nullptr) {
    auto shim = Shim::Create(FastOptions(socket_, &log_), clock);
    EXPECT_TRUE(shim.ok()) << shim.status();
    return shim.ok() ? *std::move(shim) : nullptr;
  }
  bool WaitConnected(Shim& shim) {
    return agent_->WaitFor([&] { return shim.stats().link.connected && agent_->attached(); });
  }

  std::string socket_;
  LogSink log_;
  std::unique_ptr<FakeAgent> agent_;
};

TEST_F(ShimTest, StreamsRecordsInOrderAfterHelloAndRegistration) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  CommunicatorInfo comm{kComm, CommKind::kDp, {1, 3}, "dp0"};
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
  ASSERT_TRUE(shim->RegisterCommunicator({kComm, CommKind::kWorld, {0, 1, 2, 3}, ""}).ok());

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

TEST_F(ShimTest, DirectiveReachesTheTrainerAtItsEffectiveIteration) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(21, 5, 4)));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 21, ACK_STATUS_RECEIVED); }));
  std::vector<std::pair<int64_t, uint64_t>> applied;  // (iteration, directive id)
  for (int64_t it = 0; it < 7; ++it) {
    ASSERT_TRUE(shim->PollDirectives(it,
                                     [&](const Directive& d) {
                                       applied.emplace_back(it, d.directive_id());
                                       EXPECT_EQ(d.micro_batch_plan().micro_batches(0), 6u);
                                       return absl::OkStatus();
                                     })
                    .ok());
    RecordN(*shim, it, 1);
  }
  EXPECT_EQ(applied, (std::vector<std::pair<int64_t, uint64_t>>{{4, 21}}));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 21, ACK_STATUS_APPLIED); }));
  EXPECT_EQ(FindAck(*agent_, 21, ACK_STATUS_APPLIED).applied_iteration(), 4);
  EXPECT_EQ(FindAck(*agent_, 21, ACK_STATUS_APPLIED).rank(), 1u);
}

TEST_F(ShimTest, StaleEpochsAreRejectedAndAnAppliedEpochMovesTheFence) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(1, 4, 2)));  // Older than the shim's epoch 5.
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 1, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 1, ACK_STATUS_REJECTED).reason().find("stale epoch"),
            std::string::npos);

  Directive topo = BaseDirective(2, 6, 2);  // S3 at a new epoch.
  for (uint32_t r = 0; r < 4; ++r) topo.mutable_topology_change()->add_assignments()->set_rank(r);
  ASSERT_TRUE(agent_->SendDirective(topo));
  ASSERT_TRUE(agent_->SendDirective(Plan(3, 5, 3)));  // Queued at the old epoch.
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 3, ACK_STATUS_RECEIVED); }));
  int handled = 0;
  auto handler = [&](const Directive&) {
    ++handled;
    return absl::OkStatus();
  };
  ASSERT_TRUE(shim->PollDirectives(2, handler).ok());
  EXPECT_EQ(shim->epoch(), 6u);
  ASSERT_TRUE(shim->PollDirectives(3, handler).ok());
  EXPECT_EQ(handled, 1) << "only the topology change was applied";
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 3, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 3, ACK_STATUS_REJECTED).reason().find("5 < shim epoch 6"),
            std::string::npos);
  EXPECT_TRUE(HasAck(*agent_, 2, ACK_STATUS_APPLIED));
}

TEST_F(ShimTest, MalformedDirectiveIsRejectedWithAReasonAndTrainingContinues) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  Directive no_kind = BaseDirective(8, 5, 1);
  Directive bad_plan = Plan(9, 5, 1);
  bad_plan.mutable_micro_batch_plan()->set_micro_batches(0, 1);  // Sum 3, job has 8.
  ASSERT_TRUE(agent_->SendDirective(no_kind));
  ASSERT_TRUE(agent_->SendDirective(bad_plan));
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 8, ACK_STATUS_REJECTED) && HasAck(*agent_, 9, ACK_STATUS_REJECTED);
  }));
  EXPECT_NE(FindAck(*agent_, 8, ACK_STATUS_REJECTED).reason().find("directive.kind: not set"),
            std::string::npos);
  EXPECT_NE(FindAck(*agent_, 9, ACK_STATUS_REJECTED).reason().find("sum 3"), std::string::npos);
  bool called = false;
  for (int64_t it = 0; it < 3; ++it) {
    ASSERT_TRUE(shim->PollDirectives(it,
                                     [&](const Directive&) {
                                       called = true;
                                       return absl::OkStatus();
                                     })
                    .ok());
    RecordN(*shim, it * 10, 10);
  }
  EXPECT_FALSE(called);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 30; }));
  EXPECT_FALSE(shim->paused());
  EXPECT_EQ(shim->stats().directives_rejected, 2u);
}

TEST_F(ShimTest, HandlerErrorAndMissingHandlerAreRejectedWithReasons) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(31, 5, 1)));
  ASSERT_TRUE(agent_->SendDirective(Plan(32, 5, 2)));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 32, ACK_STATUS_RECEIVED); }));
  ASSERT_TRUE(
      shim->PollDirectives(
              1, [](const Directive&) { return absl::FailedPreconditionError("pipeline drained"); })
          .ok());
  ASSERT_TRUE(shim->PollDirectives(2, nullptr).ok());
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 31, ACK_STATUS_REJECTED) && HasAck(*agent_, 32, ACK_STATUS_REJECTED);
  }));
  EXPECT_NE(FindAck(*agent_, 31, ACK_STATUS_REJECTED).reason().find("pipeline drained"),
            std::string::npos);
  EXPECT_NE(FindAck(*agent_, 32, ACK_STATUS_REJECTED).reason().find("no handler"),
            std::string::npos);
}

TEST_F(ShimTest, PauseHoldsAtTheSafePointRunsValidationAndResumes) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  std::vector<bool> pause_calls;
  std::thread::id executor_thread;
  shim->SetPauseHandler([&](bool paused) { pause_calls.push_back(paused); });
  shim->SetValidationExecutor(
      [&](const falcon::v1::ValidationTask& t) -> absl::StatusOr<falcon::v1::ValidationResult> {
        executor_thread = std::this_thread::get_id();
        falcon::v1::ValidationResult r;
        r.set_gemm_duration_ns(1000 * t.gemm().m());
        r.set_gemm_flops(2.0e12);
        return r;
      });
  Directive pause = BaseDirective(41, 5, 3);
  pause.mutable_pause()->set_max_duration_ns(300'000'000'000);
  ASSERT_TRUE(agent_->SendDirective(pause));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 41, ACK_STATUS_RECEIVED); }));

  std::atomic<bool> returned{false};
  std::thread::id trainer_thread;
  std::thread trainer([&] {
    trainer_thread = std::this_thread::get_id();
    EXPECT_TRUE(shim->PollDirectives(3, nullptr).ok());
    returned = true;
  });
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 41, ACK_STATUS_APPLIED); }));
  EXPECT_TRUE(shim->paused());

  falcon::v1::AgentToShim task;
  falcon::v1::ValidationTask* t = task.mutable_validation_task();
  t->set_task_id(77);
  t->set_job("job1");
  t->set_epoch(5);
  t->add_ranks(1);
  t->mutable_gemm()->set_m(64);
  t->mutable_gemm()->set_n(64);
  t->mutable_gemm()->set_k(64);
  t->mutable_gemm()->set_repeats(3);
  ASSERT_TRUE(agent_->Send(task));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 1; }));
  const falcon::v1::ValidationResult result = agent_->results()[0];
  EXPECT_EQ(result.task_id(), 77u);
  EXPECT_EQ(result.rank(), 1u);
  EXPECT_EQ(result.job(), "job1");
  EXPECT_EQ(result.gemm_duration_ns(), 64000);
  EXPECT_TRUE(result.error().empty());
  EXPECT_FALSE(returned.load()) << "still held at the safe point";

  Directive resume = BaseDirective(42, 5, 0);
  resume.mutable_resume();
  ASSERT_TRUE(agent_->SendDirective(resume));
  trainer.join();
  EXPECT_TRUE(returned.load());
  EXPECT_FALSE(shim->paused());
  EXPECT_EQ(executor_thread, trainer_thread) << "validation runs on the trainer's thread";
  EXPECT_EQ(pause_calls, (std::vector<bool>{true, false}));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 42, ACK_STATUS_APPLIED); }));
  EXPECT_EQ(shim->stats().pauses, 1u);
}

TEST_F(ShimTest, PauseReleasesItselfAfterMaxDuration) {
  FakeClock clock;
  std::unique_ptr<Shim> shim = MakeShim(&clock);
  ASSERT_TRUE(WaitConnected(*shim));
  Directive pause = BaseDirective(51, 5, 0);
  pause.mutable_pause()->set_max_duration_ns(1'000'000'000);
  ASSERT_TRUE(agent_->SendDirective(pause));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 51, ACK_STATUS_RECEIVED); }));
  std::thread trainer([&] { EXPECT_TRUE(shim->PollDirectives(0, nullptr).ok()); });
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->paused(); }));
  clock.Advance(absl::Milliseconds(999));
  EXPECT_TRUE(shim->paused());
  clock.Advance(absl::Milliseconds(2));
  trainer.join();
  EXPECT_FALSE(shim->paused());
  EXPECT_TRUE(log_.Contains("released after max_duration_ns"));
}

TEST_F(ShimTest, ValidationProblemsComeBackAsErrors) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  falcon::v1::AgentToShim m;
  falcon::v1::ValidationTask* t = m.mutable_validation_task();
  t->set_task_id(5);
  t->set_job("job1");
  t->set_epoch(5);
  t->mutable_link_pass()->add_links()->set_src_rank(1);  // dst 0
  t->mutable_link_pass()->set_bytes(1 << 20);
  t->mutable_link_pass()->set_repeats(2);
  ASSERT_TRUE(agent_->Send(m));  // Valid, but no executor.
  t->set_task_id(6);
  t->set_epoch(2);  // Stale.
  ASSERT_TRUE(agent_->Send(m));
  t->set_task_id(7);
  t->set_epoch(5);
  t->clear_ranks();
  t->add_ranks(0);  // Not this rank: ignored.
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 1; }));
  ASSERT_TRUE(shim->PollDirectives(0, nullptr).ok());
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 2; }));
  std::vector<falcon::v1::ValidationResult> results = agent_->results();
  EXPECT_EQ(results[0].task_id(), 6u);
  EXPECT_NE(results[0].error().find("stale epoch"), std::string::npos);
  EXPECT_EQ(results[1].task_id(), 5u);
  EXPECT_NE(results[1].error().find("no validation executor"), std::string::npos);
}

TEST_F(ShimTest, ProfilingFollowsTheAgentAndExpires) {
  FakeClock clock;
  std::unique_ptr<Shim> shim = MakeShim(&clock);
  ASSERT_TRUE(WaitConnected(*shim));
  EXPECT_FALSE(shim->profiling());
  falcon::v1::AgentToShim m;
  m.mutable_profiling()->set_job("job1");
  m.mutable_profiling()->set_enabled(true);
  m.mutable_profiling()->set_max_duration_ns(5'000'000'000);
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->profiling(); }));
  clock.Advance(absl::Seconds(4));
  EXPECT_TRUE(shim->profiling());
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE(shim->profiling());
  m.mutable_profiling()->clear_max_duration_ns();
  m.mutable_profiling()->add_ranks(0);  // Another rank only.
  ASSERT_TRUE(agent_->Send(m));
  m.mutable_profiling()->add_ranks(1);
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->profiling(); }));
}

TEST_F(ShimTest, IterationHintsAreForwarded) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(shim->RecordIteration({3, 100, 900, 2.5, 1}).ok());
  EXPECT_FALSE(shim->RecordIteration({4, 100, 50, 0, 1}).ok());
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 1; }));
  EXPECT_EQ(agent_->hints()[0].iteration(), 3);
  EXPECT_EQ(agent_->hints()[0].end_ns(), 900);
  EXPECT_DOUBLE_EQ(agent_->hints()[0].loss(), 2.5);
}

TEST_F(ShimTest, BadInputsAreRefusedAndShutdownFlushes) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  OpRecord bad = Op(1);
  bad.comm_id = 0;
  EXPECT_EQ(shim->RecordOp(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shim->RegisterCommunicator({kComm, CommKind::kDp, {0, 2}, ""}).code(),
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
}  // namespace falcon::shim
