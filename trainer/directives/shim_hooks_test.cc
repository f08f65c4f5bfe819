// ShimTrainerHooks against trainer_shim::FakeAgent: registration and op records from the collective
// observer, iteration hints, and the trainer-applied directive path (handed over once, each outcome
// acked once, a re-delivered id answered with the last ack and never handed over again), validation
// tasks and results.
#include "trainer/directives/shim_hooks.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "trainer_shim/shim_test_util.h"

namespace falcon::trainer::directives {
namespace {

using falcon::v1::ACK_STATUS_APPLIED;
using falcon::v1::ACK_STATUS_RECEIVED;
using falcon::v1::ACK_STATUS_REJECTED;
using falcon::v1::Directive;

int CountAcks(const trainer_shim::FakeAgent& agent, uint64_t id, falcon::v1::AckStatus status) {
  int n = 0;
  for (const auto& a : agent.acks()) n += a.directive_id() == id && a.status() == status;
  return n;
}

class TrainerHooksTest : public trainer_shim::ShimTest {
 protected:
  std::unique_ptr<ShimTrainerHooks> MakeHooks() {
    ShimTrainerHooksOptions o;
    o.job = "job1";
    o.agent_socket = socket_;
    o.node = "node1";
    o.rank = 1;
    o.world_size = 4;
    o.local_rank = 1;  // The second rank of its node.
    o.dp_size = 2;
    o.pp_size = 2;
    o.global_micro_batches = 8;
    o.pipeline_blocks = 6;
    o.block_state_bytes = 12 << 10;
    o.log = log_.Fn();
    auto hooks = ShimTrainerHooks::Create(std::move(o));
    EXPECT_TRUE(hooks.ok()) << hooks.status();
    return hooks.ok() ? *std::move(hooks) : nullptr;
  }
  // Polls until the trainer is handed something (or 20 s pass).
  std::vector<Directive> PollUntilAny(ShimTrainerHooks& hooks, int64_t iteration) {
    std::vector<Directive> got;
    trainer_shim::WaitUntil([&] {
      got = hooks.PollDirectives(iteration);
      return !got.empty();
    });
    return got;
  }
};

TEST_F(TrainerHooksTest, BadOptionsAreRejectedNamingTheField) {
  ShimTrainerHooksOptions o;
  o.job = "job1";
  EXPECT_NE(ShimTrainerHooks::Create(o).status().message().find("agent_socket"), std::string::npos);
  o.agent_socket = socket_;
  o.rank = 4;
  o.world_size = 4;
  EXPECT_NE(ShimTrainerHooks::Create(o).status().message().find("rank"), std::string::npos);
  o.rank = 0;
  o.local_rank = 4;
  EXPECT_NE(ShimTrainerHooks::Create(o).status().message().find("local_rank"), std::string::npos);
  o.local_rank = 0;
  o.pp_size = 2;
  o.pipeline_blocks = 1;  // Fewer blocks than stages.
  EXPECT_NE(ShimTrainerHooks::Create(o).status().message().find("pipeline_blocks"),
            std::string::npos);
  o.pipeline_blocks = 0;
  o.job = "bad job";
  EXPECT_FALSE(ShimTrainerHooks::Create(o).ok());
}

TEST_F(TrainerHooksTest, HelloCommunicatorsOpsAndHintsReachTheAgent) {
  std::unique_ptr<ShimTrainerHooks> hooks = MakeHooks();
  ASSERT_NE(hooks, nullptr);
  collective::CommInfo dp;
  dp.comm_id = 0xD0;
  dp.kind = collective::CommKind::COMM_KIND_DP;
  dp.name = "dp.pp0";
  dp.member_ranks = {0, 1};
  hooks->OnCommCreated(dp);
  collective::OpEvent op;
  op.comm_id = 0xD0;
  op.kind = collective::OpKind::OP_KIND_SEND;
  op.rank = 1;
  op.peer = 0;
  op.bytes = 4096;
  op.host_start_ns = 100;
  op.host_end_ns = 250;
  op.iteration = 3;
  hooks->OnOp(op);
  IterationReport r;
  r.rank = 1;
  r.iteration = 3;
  r.start_ns = 50;
  r.end_ns = 900;
  r.loss = 2.5;
  r.plan_version = 2;
  hooks->OnIteration(r);
  ASSERT_TRUE(agent_->WaitFor([&] {
    return !agent_->hellos().empty() && !agent_->communicators().empty() &&
           !agent_->records().empty() && !agent_->hints().empty();
  }));
  const falcon::v1::ShimHello hello = agent_->hellos().back();
  EXPECT_EQ(hello.job(), "job1");
  EXPECT_EQ(hello.rank().node(), "node1");
  EXPECT_EQ(hello.rank().local_rank(), 1u);
  EXPECT_EQ(hello.rank().dp_index(), 1);  // Rank 1 of DP=2: dp = r % D, pp = r / D.
  EXPECT_EQ(hello.rank().pp_index(), 0);
  EXPECT_EQ(hello.dp_size(), 2u);
  EXPECT_EQ(hello.pp_size(), 2u);
  EXPECT_EQ(hello.pipeline_blocks(), 6u);
  EXPECT_EQ(hello.block_state_bytes(), 12u << 10);
  EXPECT_EQ(hello.global_micro_batches(), 8u);
  const falcon::v1::Communicator c = agent_->communicators().back();
  EXPECT_EQ(c.comm_id(), 0xD0u);
  EXPECT_EQ(c.kind(), falcon::v1::COMM_KIND_DP);
  EXPECT_EQ(std::vector<uint32_t>(c.member_ranks().begin(), c.member_ranks().end()),
            (std::vector<uint32_t>{0, 1}));
  const falcon::v1::OpRecord rec = agent_->records().back();
  EXPECT_EQ(rec.op_kind(), falcon::v1::OP_KIND_SEND);
  EXPECT_EQ(rec.peer(), 0);
  EXPECT_EQ(rec.bytes(), 4096u);
  EXPECT_EQ(rec.iteration(), 3);
  EXPECT_EQ(rec.host_end_ns() - rec.host_start_ns(), 150);
  const falcon::v1::IterationHint h = agent_->hints().back();
  EXPECT_EQ(h.iteration(), 3);
  EXPECT_EQ(h.end_ns(), 900);
  EXPECT_EQ(h.plan_version(), 2);
}

TEST_F(TrainerHooksTest, EachOutcomeIsAckedOnceAndARedeliveredIdIsNeverReapplied) {
  std::unique_ptr<ShimTrainerHooks> hooks = MakeHooks();
  ASSERT_NE(hooks, nullptr);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->attached(); }));
  // Epoch 0 (the hooks start at 0); a plan of 3 entries: the shim does not check plans against
  // the layout (the trainer does, against its current one).
  Directive plan = trainer_shim::Plan(21, 0, 4);
  plan.mutable_micro_batch_plan()->add_micro_batches(0);
  ASSERT_TRUE(agent_->SendDirective(plan));
  std::vector<Directive> got = PollUntilAny(*hooks, 2);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].directive_id(), 21u);
  EXPECT_TRUE(agent_->acks().empty());  // The trainer acks, not the shim.

  hooks->Ack(got[0], ACK_STATUS_RECEIVED, "", -1);
  hooks->Ack(got[0], ACK_STATUS_RECEIVED, "", -1);  // A repeat is not sent again.
  ASSERT_TRUE(
      agent_->WaitFor([&] { return trainer_shim::HasAck(*agent_, 21, ACK_STATUS_RECEIVED); }));
  ASSERT_TRUE(agent_->SendDirective(plan));  // Re-delivered while pending: RECEIVED again.
  ASSERT_TRUE(agent_->WaitFor([&] { return CountAcks(*agent_, 21, ACK_STATUS_RECEIVED) == 2; }));
  hooks->Ack(got[0], ACK_STATUS_APPLIED, "", 4);
  hooks->Ack(got[0], ACK_STATUS_APPLIED, "", 4);        // The trainer's re-ack: dropped.
  hooks->Ack(got[0], ACK_STATUS_REJECTED, "late", -1);  // A second outcome: dropped.
  ASSERT_TRUE(
      agent_->WaitFor([&] { return trainer_shim::HasAck(*agent_, 21, ACK_STATUS_APPLIED); }));
  EXPECT_EQ(trainer_shim::FindAck(*agent_, 21, ACK_STATUS_APPLIED).applied_iteration(), 4);

  ASSERT_TRUE(agent_->SendDirective(plan));  // Re-delivered after the outcome: answered with it.
  ASSERT_TRUE(agent_->WaitFor([&] { return CountAcks(*agent_, 21, ACK_STATUS_APPLIED) == 2; }));
  EXPECT_TRUE(hooks->PollDirectives(5).empty());  // Never handed to the trainer again.
  EXPECT_EQ(CountAcks(*agent_, 21, ACK_STATUS_RECEIVED), 2);
  EXPECT_EQ(CountAcks(*agent_, 21, ACK_STATUS_REJECTED), 0);
}

TEST_F(TrainerHooksTest, MalformedAndForeignDirectivesAreRejectedByTheShim) {
  std::unique_ptr<ShimTrainerHooks> hooks = MakeHooks();
  ASSERT_NE(hooks, nullptr);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->attached(); }));
  Directive no_kind = trainer_shim::BaseDirective(8, 0, 3);
  Directive other_job = trainer_shim::Plan(9, 0, 3);
  other_job.set_job("job2");
  Directive not_mine =
      trainer_shim::Plan(10, 0, 3);  // Targets rank 3 only: handed over, never acked here.
  not_mine.add_target_ranks(3);
  ASSERT_TRUE(agent_->SendDirective(no_kind));
  ASSERT_TRUE(agent_->SendDirective(other_job));
  ASSERT_TRUE(agent_->SendDirective(not_mine));
  ASSERT_TRUE(agent_->WaitFor([&] {
    return trainer_shim::HasAck(*agent_, 8, ACK_STATUS_REJECTED) &&
           trainer_shim::HasAck(*agent_, 9, ACK_STATUS_REJECTED);
  }));
  EXPECT_NE(trainer_shim::FindAck(*agent_, 9, ACK_STATUS_REJECTED).reason().find("job2"),
            std::string::npos);
  std::vector<Directive> got = PollUntilAny(*hooks, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].directive_id(), 10u);
}

TEST_F(TrainerHooksTest, ValidationTasksAndResultsPassThrough) {
  std::unique_ptr<ShimTrainerHooks> hooks = MakeHooks();
  ASSERT_NE(hooks, nullptr);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->attached(); }));
  falcon::v1::AgentToShim m;
  falcon::v1::ValidationTask* t = m.mutable_validation_task();
  t->set_task_id(77);
  t->set_job("job1");
  t->add_ranks(1);
  t->mutable_gemm()->set_m(8);
  t->mutable_gemm()->set_n(8);
  t->mutable_gemm()->set_k(8);
  t->mutable_gemm()->set_repeats(1);
  ASSERT_TRUE(agent_->Send(m));
  std::vector<falcon::v1::ValidationTask> tasks;
  ASSERT_TRUE(trainer_shim::WaitUntil([&] {
    tasks = hooks->PollValidationTasks(0);
    return !tasks.empty();
  }));
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].task_id(), 77u);
  falcon::v1::ValidationResult result;
  result.set_task_id(77);
  result.set_gemm_duration_ns(1234);
  hooks->ReportValidation(result);
  ASSERT_TRUE(agent_->WaitFor([&] { return !agent_->results().empty(); }));
  EXPECT_EQ(agent_->results()[0].task_id(), 77u);
  EXPECT_EQ(agent_->results()[0].job(), "job1");
  EXPECT_EQ(agent_->results()[0].rank(), 1u);
  EXPECT_EQ(agent_->results()[0].gemm_duration_ns(), 1234);
}

}  // namespace
}  // namespace falcon::trainer::directives
