// The agent with the real trainer_shim library (falcon::trainer_shim::Shim) on its unix socket and
// a controller on loopback: telemetry across an agent restart, and directives and validation tasks
// relayed both ways.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/agent.h"
#include "agent/testing/fake_controller.h"
#include "agent/testing/fast_options.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "trainer_shim/shim.h"

namespace falcon::agent {
namespace {

using testing::FakeController;
using testing::FakeControllerStore;
using trainer_shim::Shim;

constexpr char kJob[] = "shim-job";
constexpr uint64_t kComm = 0xC0;
constexpr int64_t kIterationNs = 10'000'000;
constexpr absl::Duration kWait = absl::Seconds(30);

bool WaitUntil(const std::function<bool()>& predicate) {
  const absl::Time deadline = absl::Now() + kWait;
  while (!predicate()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::map<std::pair<uint32_t, int64_t>, int> SummaryCounts(const FakeControllerStore& store) {
  std::map<std::pair<uint32_t, int64_t>, int> counts;
  for (const v1::TelemetryBatch& b : store.Batches("agent-n1")) {
    for (const v1::IterationSummary& s : b.iterations()) counts[{s.rank(), s.iteration()}]++;
  }
  return counts;
}

class ShimIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-agent-shim-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(controller_.Start().ok());
    StartAgent();
    for (uint32_t rank = 0; rank < 2; ++rank) {
      trainer_shim::ShimOptions o;
      o.job = kJob;
      o.rank = rank;
      o.world_size = 2;
      o.node = "n1";
      o.local_rank = rank;
      o.pid = 4000 + static_cast<int32_t>(rank);
      o.dp_index = static_cast<int32_t>(rank);
      o.dp_size = 2;
      o.agent_socket = dir_ + "/agent.sock";
      o.flush_interval = absl::Milliseconds(2);
      o.reconnect_backoff.initial = absl::Milliseconds(5);
      o.reconnect_backoff.max = absl::Milliseconds(50);
      o.log = [](std::string_view) {};
      auto created = Shim::Create(o);
      ASSERT_TRUE(created.ok()) << created.status();
      shims_.push_back(std::move(*created));
      ASSERT_TRUE(shims_.back()
                      ->RegisterCommunicator({kComm, common::CommKind::COMM_KIND_DP, {0, 1}, "dp"})
                      .ok());
    }
  }

  void TearDown() override {
    for (auto& s : shims_) s->Shutdown();
    agent_.reset();
    controller_.Kill();
    std::filesystem::remove_all(dir_);
  }

  void StartAgent() {
    const AgentOptions o = testing::FastAgentOptions(controller_.address(), dir_ + "/agent.sock");
    auto agent = Agent::Start(o, clock_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
  }

  // One training iteration of every rank: safe point, an all-reduce, the iteration hint.
  void Iteration(int64_t i, bool hint = true) {
    for (uint32_t rank = 0; rank < shims_.size(); ++rank) {
      Shim& s = *shims_[rank];
      ASSERT_TRUE(s.PollDirectives(i, nullptr).ok());
      trainer_shim::OpRecord op;
      op.comm_id = kComm;
      op.op_kind = common::OpKind::OP_KIND_ALL_REDUCE;
      op.bytes = 1 << 20;
      op.host_start_ns = i * kIterationNs + 6'000'000;
      op.host_end_ns = i * kIterationNs + 9'000'000;
      ASSERT_TRUE(s.RecordOp(op).ok());
      if (hint) {
        ASSERT_TRUE(s.RecordIteration({i, i * kIterationNs, (i + 1) * kIterationNs, 1.0, 0}).ok());
      }
    }
  }

  bool HasSummariesThrough(int64_t last) {
    return WaitUntil([&] {
      const auto counts = SummaryCounts(store_);
      for (uint32_t rank = 0; rank < shims_.size(); ++rank) {
        for (int64_t i = 0; i <= last; ++i) {
          if (counts.count({rank, i}) == 0) return false;
        }
      }
      return true;
    });
  }

  std::string dir_;
  common::RealClock clock_;
  FakeControllerStore store_;
  FakeController controller_{&store_};
  std::unique_ptr<Agent> agent_;
  std::vector<std::unique_ptr<Shim>> shims_;
};

TEST_F(ShimIntegrationTest, TelemetryFlowsAcrossAnAgentRestart) {
  for (int64_t i = 0; i < 100; ++i) Iteration(i);
  // Iteration 100's op (not its hint yet) completes iteration 99 at the agent.
  Iteration(100, /*hint=*/false);
  ASSERT_TRUE(HasSummariesThrough(99));

  // The agent restarts (e.g. an upgrade): drain, then a new agent on the same socket. The shims
  // reconnect and resend what the old agent had not acknowledged.
  ASSERT_TRUE(agent_->Drain(kWait).ok());
  agent_.reset();
  for (auto& s : shims_) {
    ASSERT_TRUE(s->RecordIteration({100, 100 * kIterationNs, 101 * kIterationNs, 1.0, 0}).ok());
  }
  for (int64_t i = 101; i < 150; ++i) Iteration(i);  // While no agent runs.
  StartAgent();
  for (int64_t i = 150; i < 200; ++i) Iteration(i);
  Iteration(200, /*hint=*/false);
  ASSERT_TRUE(HasSummariesThrough(199));

  const auto counts = SummaryCounts(store_);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    for (int64_t i = 0; i < 200; ++i) {
      EXPECT_EQ(counts.at({rank, i}), 1) << "rank " << rank << " iteration " << i;
    }
  }
  for (auto& s : shims_) {
    EXPECT_GE(s->stats().link.connects, 2u);
    EXPECT_EQ(s->stats().link.records_evicted, 0u);
  }
  // Summaries of the iterations the second agent saw whole carry their op.
  for (const auto& b : store_.Batches("agent-n1")) {
    for (const auto& s : b.iterations()) {
      if (s.iteration() > 100 && s.iteration() < 200) {
        ASSERT_EQ(s.comms_size(), 1) << s.iteration();
        EXPECT_EQ(s.comms(0).busy_ns(), 3'000'000);
        EXPECT_EQ(s.iteration_time_ns(), kIterationNs);
      }
    }
  }
}

TEST_F(ShimIntegrationTest, DirectivesAndValidationTasksRoundTrip) {
  Iteration(0);
  ASSERT_TRUE(controller_.WaitForAgent(kWait));
  // Both shims said hello (a directive for a rank the agent does not know yet is dropped; the
  // controller re-delivers until acked).
  ASSERT_TRUE(WaitUntil([&] {
    const auto regs = agent_->hub().Registrations();
    return regs.size() == 1 && regs[0].ranks_size() == 2;
  }));

  v1::ControllerMessage msg;
  v1::Directive* d = msg.mutable_directive();
  d->set_directive_id(31);
  d->set_job(kJob);
  d->set_effective_iteration(3);
  d->add_target_ranks(1);
  d->set_plan_version(1);
  d->mutable_micro_batch_plan()->add_micro_batches(6);
  d->mutable_micro_batch_plan()->add_micro_batches(2);
  ASSERT_TRUE(controller_.Send(msg));

  msg.Clear();
  v1::ValidationTask* t = msg.mutable_validation_task();
  t->set_task_id(41);
  t->set_job(kJob);
  t->add_ranks(0);
  t->mutable_gemm()->set_m(64);
  t->mutable_gemm()->set_n(64);
  t->mutable_gemm()->set_k(64);
  t->mutable_gemm()->set_repeats(1);
  shims_[0]->SetValidationExecutor(
      [](const v1::ValidationTask& task) -> absl::StatusOr<v1::ValidationResult> {
        v1::ValidationResult r;
        r.set_gemm_duration_ns(1000 * task.gemm().m());
        r.set_gemm_flops(1e9);
        return r;
      });
  ASSERT_TRUE(controller_.Send(msg));

  int applied_at = -1;
  auto handler = [&](const v1::Directive& got) {
    EXPECT_EQ(got.directive_id(), 31u);
    applied_at = static_cast<int>(got.effective_iteration());
    return absl::OkStatus();
  };
  auto round_tripped = [&] {
    bool applied = false, result = false;
    for (const auto& m : store_.Others()) {
      applied = applied || (m.has_directive_ack() && m.directive_ack().directive_id() == 31 &&
                            m.directive_ack().status() == v1::ACK_STATUS_APPLIED &&
                            m.directive_ack().applied_iteration() == 3);
      result = result || (m.has_validation_result() && m.validation_result().task_id() == 41 &&
                          m.validation_result().gemm_duration_ns() == 64000);
    }
    return applied && result;
  };
  // The directive must reach rank 1 before its effective iteration's safe point.
  ASSERT_TRUE(WaitUntil([&] { return shims_[1]->stats().directives_received >= 1; }));
  // Training goes on: safe points run the validation task when it arrives and apply the
  // directive at iteration 3.
  const absl::Time deadline = absl::Now() + kWait;
  for (int64_t i = 1; !round_tripped() && absl::Now() < deadline; ++i) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      ASSERT_TRUE(shims_[rank]->PollDirectives(i, handler).ok());
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_TRUE(round_tripped());
  EXPECT_EQ(applied_at, 3);
}

}  // namespace
}  // namespace falcon::agent
