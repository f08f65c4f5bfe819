#include "agent/shim_hub.h"

#include <memory>
#include <string>
#include <vector>

#include "agent/agent_metrics.h"
#include "agent/agent_metrics_table.h"
#include "common/clock.h"
#include "common/telemetry_batch.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace falcon::agent {
namespace {

constexpr int64_t kMs = 1000 * 1000;

class FakeStream : public ShimStream {
 public:
  void Send(const v1::AgentToShim& msg) override { sent.push_back(msg); }
  void Close(const absl::Status& status) override { closed = status; }
  std::vector<v1::AgentToShim> sent;
  std::optional<absl::Status> closed;
  std::vector<v1::AgentToShim> Of(v1::AgentToShim::MsgCase kind) const {
    std::vector<v1::AgentToShim> out;
    for (const auto& m : sent) {
      if (m.msg_case() == kind) out.push_back(m);
    }
    return out;
  }
};

class FakeSink : public ControllerSink {
 public:
  void Send(v1::AgentMessage msg) override { sent.push_back(std::move(msg)); }
  std::vector<v1::AgentMessage> sent;
};

v1::ShimMessage Hello(uint32_t rank, int32_t pid = 100, const std::string& job = "job1") {
  v1::ShimMessage m;
  v1::ShimHello* h = m.mutable_hello();
  h->set_job(job);
  h->set_world_size(4);
  h->mutable_rank()->set_rank(rank);
  h->mutable_rank()->set_node("n1");
  h->mutable_rank()->set_pid(pid);
  h->mutable_rank()->set_gpu(-1);
  h->mutable_rank()->set_dp_index(-1);
  h->mutable_rank()->set_pp_index(-1);
  h->mutable_rank()->set_tp_index(-1);
  return m;
}

v1::ShimMessage Comm(uint64_t id, std::vector<uint32_t> members) {
  v1::ShimMessage m;
  m.mutable_communicator()->set_comm_id(id);
  m.mutable_communicator()->set_kind(v1::COMM_KIND_DP);
  for (uint32_t r : members) m.mutable_communicator()->add_member_ranks(r);
  return m;
}

// An op batch with one all-reduce per iteration [first, first + n), 10 ms apart.
v1::ShimMessage Ops(uint64_t sequence, int first, int n, uint64_t first_seq) {
  v1::ShimMessage m;
  v1::OpBatch* b = m.mutable_op_batch();
  b->set_sequence(sequence);
  for (int i = 0; i < n; ++i) {
    v1::OpRecord* r = b->add_records();
    r->set_comm_id(9);
    r->set_op_kind(v1::OP_KIND_ALL_REDUCE);
    r->set_peer(-1);
    r->set_bytes(4096);
    r->set_host_start_ns((first + i) * 10 * kMs + 5 * kMs);
    r->set_host_end_ns((first + i) * 10 * kMs + 8 * kMs);
    r->set_seq(first_seq + i);
    r->set_iteration(first + i);
  }
  return m;
}

v1::ShimMessage HintMsg(int64_t iteration) {
  v1::ShimMessage m;
  m.mutable_iteration()->set_iteration(iteration);
  m.mutable_iteration()->set_start_ns(iteration * 10 * kMs);
  m.mutable_iteration()->set_end_ns((iteration + 1) * 10 * kMs);
  return m;
}

class ShimHubTest : public ::testing::Test {
 protected:
  ShimHubTest()
      : registry_(std::make_shared<prometheus::Registry>()),
        metrics_(registry_, "n1", "test"),
        hub_(Opts(), clock_, &metrics_, &sink_) {}

  static ShimHub::Options Opts() {
    ShimHub::Options o;
    o.node = "n1";
    return o;
  }

  // Opens a stream for `rank`, says hello and registers comm 9 = {0, 1}.
  uint64_t Attach(FakeStream& stream, uint32_t rank, int32_t pid = 100) {
    const uint64_t id = hub_.Open(&stream);
    hub_.OnMessage(id, Hello(rank, pid));
    hub_.OnMessage(id, Comm(9, {0, 1}));
    return id;
  }

  common::FakeClock clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  AgentMetrics metrics_;
  FakeSink sink_;
  ShimHub hub_;

  // falcon_agent_errors_total{where}; -1 when there is no such series.
  double ErrorCount(const std::string& where) {
    for (const prometheus::MetricFamily& f : registry_->Collect()) {
      if (f.name != metric::kErrors.name) continue;
      for (const auto& c : f.metric) {
        for (const auto& l : c.label) {
          if (l.name == "where" && l.value == where) return c.counter.value;
        }
      }
    }
    return -1;
  }
};

TEST_F(ShimHubTest, HelloThenBatchesAreAckedAndDuplicatesIgnored) {
  FakeStream s;
  const uint64_t id = Attach(s, 0);
  auto welcome = s.Of(v1::AgentToShim::kWelcome);
  ASSERT_EQ(welcome.size(), 1u);
  EXPECT_EQ(welcome[0].welcome().acked_sequence(), 0u);
  EXPECT_EQ(welcome[0].welcome().session_id(), "n1/job1/0/" + std::to_string(id));
  EXPECT_FALSE(welcome[0].welcome().profiling());

  hub_.OnMessage(id, Ops(1, 0, 3, 1));
  hub_.OnMessage(id, Ops(1, 0, 3, 1));  // Resent after a lost ack.
  hub_.OnMessage(id, Ops(2, 3, 3, 4));
  auto acks = s.Of(v1::AgentToShim::kOpBatchAck);
  ASSERT_EQ(acks.size(), 3u);
  EXPECT_EQ(acks[0].op_batch_ack().sequence(), 1u);
  EXPECT_EQ(acks[1].op_batch_ack().sequence(), 1u);
  EXPECT_EQ(acks[2].op_batch_ack().sequence(), 2u);
  EXPECT_EQ(hub_.stats().duplicate_batches, 1u);
  EXPECT_TRUE(s.Of(v1::AgentToShim::kError).empty());
}

TEST_F(ShimHubTest, MalformedMessageGetsFieldErrorAndStreamsGoOn) {
  FakeStream a, b;
  const uint64_t ida = Attach(a, 0);
  const uint64_t idb = Attach(b, 1);
  v1::ShimMessage bad = Ops(1, 0, 2, 1);
  bad.mutable_op_batch()->mutable_records(1)->set_host_end_ns(0);
  hub_.OnMessage(ida, bad);
  auto errors = a.Of(v1::AgentToShim::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].error().field(), "op_batch.records[1].host_end_ns");
  EXPECT_FALSE(a.closed.has_value());
  // Both sessions keep working.
  hub_.OnMessage(ida, Ops(2, 0, 2, 1));
  hub_.OnMessage(idb, Ops(1, 0, 2, 1));
  EXPECT_EQ(a.Of(v1::AgentToShim::kOpBatchAck).back().op_batch_ack().sequence(), 2u);
  EXPECT_EQ(b.Of(v1::AgentToShim::kOpBatchAck).back().op_batch_ack().sequence(), 1u);
  EXPECT_TRUE(b.Of(v1::AgentToShim::kError).empty());
  EXPECT_EQ(hub_.stats().errors, 1u);
  EXPECT_EQ(ErrorCount(metric::where::kShimMessageRefused), 1);
}

TEST_F(ShimHubTest, FirstMessageMustBeHello) {
  FakeStream s;
  const uint64_t id = hub_.Open(&s);
  hub_.OnMessage(id, Ops(1, 0, 1, 1));
  hub_.OnMessage(id, v1::ShimMessage());
  auto errors = s.Of(v1::AgentToShim::kError);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].error().field(), "hello");
  EXPECT_EQ(errors[1].error().field(), "msg");
  hub_.OnMessage(id, Hello(0));
  EXPECT_EQ(s.Of(v1::AgentToShim::kWelcome).size(), 1u);
  hub_.OnMessage(id, Hello(0));
  EXPECT_EQ(s.Of(v1::AgentToShim::kError).back().error().field(), "hello");
}

TEST_F(ShimHubTest, ReconnectKeepsTheRankSessionUnlessThePidChanges) {
  FakeStream s1;
  const uint64_t id1 = Attach(s1, 0, 100);
  hub_.OnMessage(id1, Ops(1, 0, 2, 1));
  hub_.OnMessage(id1, Ops(2, 2, 2, 3));
  hub_.OnClosed(id1);

  FakeStream s2;
  const uint64_t id2 = Attach(s2, 0, 100);
  EXPECT_EQ(s2.Of(v1::AgentToShim::kWelcome)[0].welcome().acked_sequence(), 2u);
  hub_.OnMessage(id2, Ops(2, 2, 2, 3));  // Unacked resend: deduplicated.
  EXPECT_EQ(hub_.stats().duplicate_batches, 1u);
  hub_.OnClosed(id2);

  FakeStream s3;
  Attach(s3, 0, 101);  // The trainer restarted.
  EXPECT_EQ(s3.Of(v1::AgentToShim::kWelcome)[0].welcome().acked_sequence(), 0u);
}

TEST_F(ShimHubTest, NewerStreamOfTheSameRankSupersedesTheOld) {
  FakeStream s1, s2;
  const uint64_t id1 = Attach(s1, 0);
  Attach(s2, 0);
  ASSERT_TRUE(s1.closed.has_value());
  EXPECT_EQ(s1.closed->code(), absl::StatusCode::kAborted);
  hub_.OnMessage(id1, Ops(1, 0, 1, 1));  // Ignored: superseded.
  EXPECT_TRUE(s1.Of(v1::AgentToShim::kOpBatchAck).empty());
  hub_.OnClosed(id1);
  EXPECT_EQ(hub_.stats().superseded, 1u);
  EXPECT_EQ(hub_.live_sessions(), 1u);
}

TEST_F(ShimHubTest, DirectivesReachTargetsAndAreRedeliveredUntilAcked) {
  FakeStream s0, s1;
  const uint64_t id0 = Attach(s0, 0);
  const uint64_t id1 = Attach(s1, 1);
  v1::Directive d;
  d.set_directive_id(7);
  d.set_job("job1");
  d.set_plan_version(3);
  d.add_target_ranks(1);
  d.add_target_ranks(3);  // Not on this node.
  d.mutable_micro_batch_plan()->add_micro_batches(4);
  hub_.OnDirective(d);
  EXPECT_TRUE(s0.Of(v1::AgentToShim::kDirective).empty());
  ASSERT_EQ(s1.Of(v1::AgentToShim::kDirective).size(), 1u);

  hub_.OnClosed(id1);
  FakeStream s1b;
  const uint64_t id1b = Attach(s1b, 1);
  ASSERT_EQ(s1b.Of(v1::AgentToShim::kDirective).size(), 1u);  // Not acked yet: again.
  v1::ShimMessage ack;
  ack.mutable_directive_ack()->set_directive_id(7);
  ack.mutable_directive_ack()->set_job("job1");
  ack.mutable_directive_ack()->set_rank(1);
  ack.mutable_directive_ack()->set_status(v1::ACK_STATUS_APPLIED);
  ack.mutable_directive_ack()->set_applied_iteration(10);
  hub_.OnMessage(id1b, ack);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(sink_.sent[0].directive_ack().directive_id(), 7u);
  hub_.OnClosed(id1b);
  FakeStream s1c;
  Attach(s1c, 1);
  EXPECT_TRUE(s1c.Of(v1::AgentToShim::kDirective).empty());

  // A directive for a job not on this node is ignored.
  d.set_job("other");
  hub_.OnDirective(d);
  EXPECT_EQ(hub_.stats().ignored_controller_messages, 1u);
  EXPECT_EQ(ErrorCount(metric::where::kDirectiveIgnored), 1);
  (void)id0;
}

// While profiling, the node's ranks' raw ops go together: one batch, one RankOps per rank.
TEST_F(ShimHubTest, RawOpsOfTheNodesRanksGoInOneBatch) {
  FakeStream s0, s1;
  const uint64_t id0 = Attach(s0, 0);
  const uint64_t id1 = Attach(s1, 1);
  v1::ProfilingControl p;
  p.set_job("job1");
  p.set_enabled(true);
  p.set_max_duration_ns(1000 * kMs);
  hub_.OnProfiling(p);
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);  // The registration.
  hub_.OnMessage(id0, Ops(1, 0, 2, 1));
  hub_.OnMessage(id1, Ops(1, 0, 3, 1));
  out.clear();
  hub_.Flush(false, &out);
  int with_ops = 0;
  for (const auto& b : out) {
    if (common::OpRecordCount(b) == 0) continue;
    ++with_ops;
    EXPECT_EQ(b.ops_size(), 0);
    ASSERT_EQ(b.rank_ops_size(), 2);
    EXPECT_EQ(b.rank_ops(0).rank(), 0u);
    EXPECT_EQ(b.rank_ops(0).ops_size(), 2);
    EXPECT_EQ(b.rank_ops(1).rank(), 1u);
    EXPECT_EQ(b.rank_ops(1).ops_size(), 3);
  }
  EXPECT_EQ(with_ops, 1);
}

TEST_F(ShimHubTest, ValidationTaskForARankWithoutSessionFailsAtOnce) {
  FakeStream s0, s1;
  Attach(s0, 0);
  const uint64_t id1 = Attach(s1, 1);
  hub_.OnClosed(id1);
  v1::ValidationTask t;
  t.set_task_id(5);
  t.set_job("job1");
  t.add_ranks(0);
  t.add_ranks(1);
  t.add_ranks(2);  // Elsewhere.
  t.mutable_gemm()->set_m(64);
  hub_.OnValidationTask(t);
  ASSERT_EQ(s0.Of(v1::AgentToShim::kValidationTask).size(), 1u);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(sink_.sent[0].validation_result().rank(), 1u);
  EXPECT_NE(sink_.sent[0].validation_result().error().find("no live shim session"),
            std::string::npos);
}

TEST_F(ShimHubTest, SummariesAlwaysRawOpsOnlyWhileProfiling) {
  FakeStream s;
  const uint64_t id = Attach(s, 0);
  for (int i = 0; i < 3; ++i) hub_.OnMessage(id, HintMsg(i));
  hub_.OnMessage(id, Ops(1, 0, 4, 1));
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].has_registration());
  EXPECT_EQ(out[0].registration().ranks_size(), 1);
  EXPECT_EQ(out[0].registration().communicators_size(), 1);
  EXPECT_EQ(out[0].iterations_size(), 3);
  EXPECT_EQ(out[0].ops_size(), 0);

  v1::ProfilingControl p;
  p.set_job("job1");
  p.set_enabled(true);
  p.set_max_duration_ns(1000 * kMs);
  hub_.OnProfiling(p);
  ASSERT_EQ(s.Of(v1::AgentToShim::kProfiling).size(), 1u);
  hub_.OnMessage(id, Ops(2, 4, 2, 5));
  out.clear();
  hub_.Flush(false, &out);
  int ops = 0;
  for (const auto& b : out) {
    EXPECT_FALSE(b.has_registration());
    EXPECT_EQ(b.ops_size(), 0);  // A node's ops go as RankOps.
    for (const v1::RankOps& ro : b.rank_ops()) {
      EXPECT_EQ(ro.rank(), 0u);
      ops += ro.ops_size();
    }
  }
  EXPECT_EQ(ops, 2);
  clock_.Advance(absl::Seconds(2));  // Profiling ran out.
  hub_.OnMessage(id, Ops(3, 6, 2, 7));
  out.clear();
  hub_.Flush(false, &out);
  for (const auto& b : out) EXPECT_EQ(common::OpRecordCount(b), 0);
}

TEST_F(ShimHubTest, SummariesAreOrderedByIterationThenRank) {
  FakeStream s0, s1;
  const uint64_t id0 = Attach(s0, 0);
  const uint64_t id1 = Attach(s1, 1);
  for (int i = 0; i < 3; ++i) {
    hub_.OnMessage(id0, HintMsg(i));
    hub_.OnMessage(id1, HintMsg(i));
  }
  hub_.OnMessage(id0, Ops(1, 0, 4, 1));
  hub_.OnMessage(id1, Ops(1, 0, 4, 1));
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);
  ASSERT_EQ(out.size(), 1u);
  std::vector<std::pair<int64_t, uint32_t>> order;
  for (const auto& s : out[0].iterations()) order.emplace_back(s.iteration(), s.rank());
  EXPECT_EQ(order, (std::vector<std::pair<int64_t, uint32_t>>{
                       {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}}));
}

TEST_F(ShimHubTest, IdleJobsAreForgotten) {
  FakeStream s;
  const uint64_t id = Attach(s, 0);
  hub_.OnClosed(id);
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);
  EXPECT_EQ(hub_.Registrations().size(), 1u);
  clock_.Advance(absl::Minutes(11));
  hub_.Flush(false, &out);
  EXPECT_TRUE(hub_.Registrations().empty());
}

// An S4 restart: the job relaunches at a newer epoch on fewer ranks. The old ranks' iterations
// still reach the controller (first), their live sessions are closed, and the job's state here
// starts over: the new registration lists the new world and ranks only. A hello of another
// world_size at the job's epoch is still refused.
TEST_F(ShimHubTest, AJobRelaunchedOnANewLayoutStartsOverAfterDeliveringWhatItsOldRanksReported) {
  FakeStream s0, s1;
  const uint64_t id0 = Attach(s0, 0);
  const uint64_t id1 = Attach(s1, 1);
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);  // The old registration.
  for (int i = 0; i < 2; ++i) {
    hub_.OnMessage(id0, HintMsg(i));
    hub_.OnMessage(id1, HintMsg(i));
  }
  hub_.OnMessage(id0, Ops(1, 0, 2, 1));
  hub_.OnMessage(id1, Ops(1, 0, 2, 1));
  hub_.OnClosed(id0);  // Rank 0's process exited; rank 1's stream is still open.

  v1::ShimMessage stale = Hello(0, 300);
  stale.mutable_hello()->set_world_size(2);  // Another layout at the same epoch: refused.
  FakeStream refused;
  hub_.OnMessage(hub_.Open(&refused), stale);
  ASSERT_EQ(refused.Of(v1::AgentToShim::kError).size(), 1u);
  EXPECT_EQ(refused.Of(v1::AgentToShim::kError)[0].error().field(), "hello.world_size");

  v1::ShimMessage hello = Hello(0, 200);
  hello.mutable_hello()->set_world_size(2);
  hello.mutable_hello()->set_epoch(1);
  FakeStream fresh;
  const uint64_t idf = hub_.Open(&fresh);
  hub_.OnMessage(idf, hello);
  EXPECT_EQ(fresh.Of(v1::AgentToShim::kWelcome).size(), 1u);
  EXPECT_TRUE(fresh.Of(v1::AgentToShim::kError).empty());
  ASSERT_TRUE(s1.closed.has_value());
  EXPECT_EQ(s1.closed->code(), absl::StatusCode::kAborted);
  EXPECT_EQ(hub_.stats().job_restarts, 1u);

  out.clear();
  std::vector<uint64_t> tags;
  hub_.Flush(false, &out, &tags);
  ASSERT_EQ(out.size(), tags.size());
  ASSERT_GE(out.size(), 2u);
  std::vector<std::pair<int64_t, uint32_t>> old_iterations;
  for (const auto& s : out[0].iterations()) old_iterations.emplace_back(s.iteration(), s.rank());
  EXPECT_EQ(old_iterations,
            (std::vector<std::pair<int64_t, uint32_t>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
  EXPECT_FALSE(out[0].has_registration()) << "the old epoch's registration is stale";
  const v1::TelemetryBatch& last = out.back();
  ASSERT_TRUE(last.has_registration());
  EXPECT_EQ(last.registration().world_size(), 2u);
  EXPECT_EQ(last.registration().epoch(), 1u);
  ASSERT_EQ(last.registration().ranks_size(), 1);
  EXPECT_EQ(last.registration().ranks(0).pid(), 200);
  EXPECT_EQ(last.registration().communicators_size(), 0);
  hub_.OnSettled(tags);  // The old ranks' tags settle without touching the new ranks.
  EXPECT_EQ(hub_.Registrations().size(), 1u);
}

// An S3 relaunch: the same world, a newer epoch, the ranks in other groups. Each rank's new
// process takes its old process's communicator registrations away; a communicator no current
// process registers leaves the job. An old process that reconnects (same pid) keeps its own.
TEST_F(ShimHubTest, AJobRelaunchedInANewLayoutDropsTheOldProcessesCommunicators) {
  FakeStream s0, s1;
  const uint64_t id0 = Attach(s0, 0);  // Both register comm 9 {0, 1}.
  const uint64_t id1 = Attach(s1, 1);
  hub_.OnMessage(id0, Comm(11, {0, 2}));
  hub_.OnMessage(id1, Comm(12, {1, 3}));
  ASSERT_EQ(hub_.Registrations().at(0).communicators_size(), 3);
  hub_.OnClosed(id0);  // Rank 0's process exited for the relaunch.

  // Rank 1's old process reconnects at the new epoch (its shim applied the directive): nothing
  // of its own goes.
  v1::ShimMessage again = Hello(1, 100);
  again.mutable_hello()->set_epoch(1);
  FakeStream s1b;
  const uint64_t id1b = hub_.Open(&s1b);
  hub_.OnMessage(id1b, again);
  EXPECT_EQ(hub_.stats().stale_comms, 0u);

  v1::ShimMessage hello = Hello(0, 200);  // Rank 0's new process.
  hello.mutable_hello()->set_epoch(1);
  FakeStream fresh0;
  const uint64_t idf0 = hub_.Open(&fresh0);
  hub_.OnMessage(idf0, hello);
  EXPECT_TRUE(fresh0.Of(v1::AgentToShim::kError).empty());
  EXPECT_EQ(hub_.stats().job_restarts, 0u);  // The same world: not started over.
  EXPECT_EQ(hub_.stats().stale_comms, 1u);   // Comm 11; comm 9 is still rank 1's.
  hub_.OnMessage(idf0, Comm(21, {0, 1}));

  v1::ShimMessage hello1 = Hello(1, 201);  // Rank 1's new process.
  hello1.mutable_hello()->set_epoch(1);
  FakeStream fresh1;
  const uint64_t idf1 = hub_.Open(&fresh1);
  hub_.OnMessage(idf1, hello1);
  EXPECT_EQ(hub_.stats().stale_comms, 3u);  // Comms 9 and 12.
  hub_.OnMessage(idf1, Comm(21, {0, 1}));
  std::vector<v1::JobRegistration> regs = hub_.Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].epoch(), 1u);
  ASSERT_EQ(regs[0].communicators_size(), 1);
  EXPECT_EQ(regs[0].communicators(0).comm_id(), 21u);
}

// The summary batches of a Flush with their tags; registration-only batches are left out.
std::vector<std::pair<v1::TelemetryBatch, uint64_t>> FlushTagged(ShimHub& hub) {
  std::vector<v1::TelemetryBatch> out;
  std::vector<uint64_t> tags;
  hub.Flush(false, &out, &tags);
  EXPECT_EQ(out.size(), tags.size());
  std::vector<std::pair<v1::TelemetryBatch, uint64_t>> summaries;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].iterations_size() > 0) summaries.emplace_back(out[i], tags[i]);
  }
  return summaries;
}

std::vector<int64_t> Iterations(const std::vector<std::pair<v1::TelemetryBatch, uint64_t>>& b) {
  std::vector<int64_t> out;
  for (const auto& [batch, tag] : b) {
    for (const auto& s : batch.iterations()) out.push_back(s.iteration());
  }
  return out;
}

TEST_F(ShimHubTest, DeliveryAcksFollowWhatTheControllerAcknowledged) {
  FakeStream s;
  const uint64_t id = Attach(s, 0);
  ASSERT_TRUE(s.Of(v1::AgentToShim::kWelcome)[0].welcome().delivery_acks());
  hub_.OnMessage(id, Ops(1, 0, 1, 1));
  hub_.OnMessage(id, HintMsg(0));
  hub_.OnMessage(id, Ops(2, 1, 1, 2));
  hub_.OnMessage(id, HintMsg(1));
  hub_.OnMessage(id, Ops(3, 2, 1, 3));  // Iteration 2 is not hinted yet.
  auto first = FlushTagged(hub_);
  EXPECT_EQ(Iterations(first), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(s.Of(v1::AgentToShim::kDelivered).empty()) << "flushed is not delivered";

  std::vector<uint64_t> tags;
  for (const auto& [batch, tag] : first) tags.push_back(tag);
  hub_.OnSettled(tags);
  auto delivered = s.Of(v1::AgentToShim::kDelivered);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].delivered().sequence(), 2u) << "batch 3 holds iteration 2";
  EXPECT_EQ(delivered[0].delivered().iteration(), 1);
  hub_.OnSettled(tags);  // Settling twice changes nothing.
  EXPECT_EQ(s.Of(v1::AgentToShim::kDelivered).size(), 1u);

  hub_.OnMessage(id, HintMsg(2));
  hub_.OnMessage(id, Ops(4, 3, 1, 4));
  auto second = FlushTagged(hub_);
  EXPECT_EQ(Iterations(second), (std::vector<int64_t>{2}));
  hub_.OnSettled({second[0].second});
  delivered = s.Of(v1::AgentToShim::kDelivered);
  ASSERT_EQ(delivered.size(), 2u);
  EXPECT_EQ(delivered[1].delivered().sequence(), 3u);
  EXPECT_EQ(delivered[1].delivered().iteration(), 2);
}

TEST_F(ShimHubTest, ADrainingHubTakesNothingNewButStillTellsItsShimsWhatWasDelivered) {
  FakeStream s;
  const uint64_t id = Attach(s, 0);
  hub_.OnMessage(id, Ops(1, 0, 1, 1));
  hub_.OnMessage(id, HintMsg(0));
  hub_.StopAccepting();
  hub_.OnMessage(id, Ops(2, 1, 1, 2));  // Not taken, not acknowledged: the shim keeps it.
  hub_.OnMessage(id, HintMsg(1));
  FakeStream late;
  hub_.OnMessage(hub_.Open(&late), Hello(1));
  ASSERT_TRUE(late.closed.has_value());
  EXPECT_EQ(late.closed->code(), absl::StatusCode::kUnavailable) << *late.closed;
  EXPECT_TRUE(late.Of(v1::AgentToShim::kWelcome).empty());
  EXPECT_EQ(hub_.stats().refused_draining, 3u);
  ASSERT_EQ(s.Of(v1::AgentToShim::kOpBatchAck).size(), 1u);
  EXPECT_EQ(s.Of(v1::AgentToShim::kOpBatchAck)[0].op_batch_ack().sequence(), 1u);

  std::vector<v1::TelemetryBatch> out;
  std::vector<uint64_t> tags;
  hub_.Flush(/*drain=*/true, &out, &tags);
  std::vector<int64_t> iterations;
  for (const auto& b : out) {
    for (const auto& it : b.iterations()) iterations.push_back(it.iteration());
  }
  EXPECT_EQ(iterations, (std::vector<int64_t>{0})) << "iteration 1 goes to the next agent";
  EXPECT_FALSE(s.closed.has_value()) << "live sessions stay open while draining";
  hub_.OnSettled(tags);
  const auto delivered = s.Of(v1::AgentToShim::kDelivered);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].delivered().sequence(), 1u);
  EXPECT_EQ(delivered[0].delivered().iteration(), 0);
}

TEST_F(ShimHubTest, AShimResumedFromAnEarlierAgentSkipsWhatThatAgentDelivered) {
  FakeStream s;
  const uint64_t id = hub_.Open(&s);
  v1::ShimMessage hello = Hello(0);
  hello.mutable_hello()->set_delivered_iteration(1);
  hub_.OnMessage(id, hello);
  hub_.OnMessage(id, Comm(9, {0, 1}));
  // The resend: batch 7 straddles delivered iteration 1 and iteration 2.
  hub_.OnMessage(id, HintMsg(1));  // Delivered before: skipped.
  hub_.OnMessage(id, HintMsg(2));
  hub_.OnMessage(id, Ops(7, 1, 2, 2));
  hub_.OnMessage(id, Ops(8, 3, 1, 4));
  EXPECT_TRUE(s.Of(v1::AgentToShim::kError).empty());
  EXPECT_EQ(hub_.stats().skipped_delivered_ops, 1u);
  EXPECT_EQ(hub_.stats().skipped_delivered_hints, 1u);
  auto flushed = FlushTagged(hub_);
  EXPECT_EQ(Iterations(flushed), (std::vector<int64_t>{2}));
  hub_.OnSettled({flushed[0].second});
  auto delivered = s.Of(v1::AgentToShim::kDelivered);
  ASSERT_FALSE(delivered.empty());
  EXPECT_EQ(delivered.back().delivered().sequence(), 7u);
  EXPECT_EQ(delivered.back().delivered().iteration(), 2);
}

TEST_F(ShimHubTest, AReattachedShimLearnsTheHintsHeldAndWhatWasDelivered) {
  FakeStream s1;
  const uint64_t id = Attach(s1, 0);
  hub_.OnMessage(id, Ops(1, 0, 1, 1));
  hub_.OnMessage(id, HintMsg(0));
  hub_.OnMessage(id, Ops(2, 1, 1, 2));
  auto flushed = FlushTagged(hub_);
  ASSERT_EQ(Iterations(flushed), (std::vector<int64_t>{0}));
  hub_.OnClosed(id);
  hub_.OnSettled({flushed[0].second});  // Delivered while the shim is away.

  FakeStream s2;
  Attach(s2, 0);  // Same process.
  auto welcome = s2.Of(v1::AgentToShim::kWelcome);
  ASSERT_EQ(welcome.size(), 1u);
  EXPECT_EQ(welcome[0].welcome().acked_sequence(), 2u);
  ASSERT_TRUE(welcome[0].welcome().has_hinted_iteration());
  EXPECT_EQ(welcome[0].welcome().hinted_iteration(), 0);
  auto delivered = s2.Of(v1::AgentToShim::kDelivered);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].delivered().sequence(), 1u);
  EXPECT_EQ(delivered[0].delivered().iteration(), 0);
}

}  // namespace
}  // namespace falcon::agent

namespace falcon::agent {
namespace {

// The model's pipeline shape (S2L) goes from the hellos into the job's registration; a rank
// that reports another model than the job's other ranks at the same epoch is refused, naming the
// field and the rank; 0 (unknown) agrees with anything; a newer epoch may change it.
TEST_F(ShimHubTest, PipelineShapeReachesTheRegistrationAndRanksMustAgree) {
  auto hello = [](uint32_t rank, uint32_t blocks, uint64_t bytes, uint64_t epoch = 0) {
    v1::ShimMessage m = Hello(rank, 100 + static_cast<int32_t>(rank));
    m.mutable_hello()->set_pipeline_blocks(blocks);
    m.mutable_hello()->set_block_state_bytes(bytes);
    m.mutable_hello()->set_epoch(epoch);
    return m;
  };
  FakeStream a, b, c, d;
  hub_.OnMessage(hub_.Open(&a), hello(0, 16, 3 << 20));
  hub_.OnMessage(hub_.Open(&b), hello(1, 0, 0));  // An unknown model agrees.
  ASSERT_EQ(hub_.Registrations().size(), 1u);
  EXPECT_EQ(hub_.Registrations()[0].pipeline_blocks(), 16u);
  EXPECT_EQ(hub_.Registrations()[0].block_state_bytes(), 3u << 20);
  std::vector<v1::TelemetryBatch> out;
  hub_.Flush(false, &out);
  ASSERT_FALSE(out.empty());
  ASSERT_TRUE(out.back().has_registration());
  EXPECT_EQ(out.back().registration().pipeline_blocks(), 16u);

  const uint64_t idc = hub_.Open(&c);
  hub_.OnMessage(idc, hello(2, 12, 3 << 20));
  auto errors = c.Of(v1::AgentToShim::kError);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].error().field(), "hello.pipeline_blocks");
  EXPECT_EQ(errors[0].error().message(),
            "rank 2 of job 'job1' says 12, the job's other ranks on this node said 16 at epoch 0: "
            "every rank of a job must report the same model");
  EXPECT_TRUE(c.Of(v1::AgentToShim::kWelcome).empty());
  hub_.OnMessage(idc, hello(2, 16, 1));
  EXPECT_EQ(c.Of(v1::AgentToShim::kError).back().error().field(), "hello.block_state_bytes");
  EXPECT_EQ(hub_.Registrations()[0].ranks_size(), 2) << "rank 2 did not attach";

  // A relaunch at a newer epoch (the same world) may run another model.
  hub_.OnMessage(hub_.Open(&d), hello(3, 12, 1 << 20, 1));
  EXPECT_EQ(d.Of(v1::AgentToShim::kWelcome).size(), 1u);
  EXPECT_EQ(hub_.Registrations()[0].pipeline_blocks(), 12u);
  EXPECT_EQ(hub_.Registrations()[0].block_state_bytes(), 1u << 20);
}

TEST_F(ShimHubTest, AShimOfAnotherUidCannotAttachToAJobHeldHere) {
  FakeStream owner, intruder, same_uid;
  const uint64_t a = hub_.Open(&owner, 1000);
  hub_.OnMessage(a, Hello(0));
  ASSERT_EQ(owner.Of(v1::AgentToShim::kWelcome).size(), 1u);

  // Another uid claims rank 0 (the live one) and rank 1 of the same job: both refused.
  for (uint32_t rank : {0u, 1u}) {
    FakeStream s;
    const uint64_t b = hub_.Open(&s, 1001);
    hub_.OnMessage(b, Hello(rank, 999));
    ASSERT_TRUE(s.closed.has_value());
    EXPECT_EQ(s.closed->code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(s.closed->message(),
              "hello.job: job 'job1' is held on this node by a shim of uid 1000, not uid 1001");
    EXPECT_TRUE(s.Of(v1::AgentToShim::kWelcome).empty());
    hub_.OnClosed(b);
  }
  EXPECT_FALSE(owner.closed.has_value());  // The owner's session was not superseded.
  EXPECT_EQ(hub_.stats().owner_refusals, 2u);
  EXPECT_EQ(hub_.stats().superseded, 0u);
  EXPECT_EQ(ErrorCount(metric::where::kShimJobOwnerRefused), 2);
  ASSERT_EQ(hub_.Registrations().size(), 1u);
  EXPECT_EQ(hub_.Registrations()[0].ranks_size(), 1);

  // The owner's uid attaches another rank; another job is free for any uid.
  const uint64_t c = hub_.Open(&same_uid, 1000);
  hub_.OnMessage(c, Hello(1));
  EXPECT_EQ(same_uid.Of(v1::AgentToShim::kWelcome).size(), 1u);
  const uint64_t d = hub_.Open(&intruder, 1001);
  hub_.OnMessage(d, Hello(0, 100, "job2"));
  EXPECT_EQ(intruder.Of(v1::AgentToShim::kWelcome).size(), 1u);
}

}  // namespace
}  // namespace falcon::agent
