#include "agent/shim_validation.h"

#include <string>

#include "common/layer_split.h"
#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

v1::ShimHello GoodHello() {
  v1::ShimHello h;
  h.set_job("llm-7b.run_1");
  h.set_world_size(8);
  h.mutable_rank()->set_rank(3);
  h.mutable_rank()->set_node("n1");
  h.mutable_rank()->set_pid(42);
  h.mutable_rank()->set_gpu(-1);
  h.mutable_rank()->set_dp_index(-1);
  h.mutable_rank()->set_pp_index(-1);
  h.mutable_rank()->set_tp_index(-1);
  return h;
}

std::string FieldOf(const absl::Status& s) { return ToFieldError(s).field(); }

TEST(ShimValidationTest, HelloFieldsAreNamed) {
  EXPECT_TRUE(ValidateShimHello(GoodHello()).ok());
  v1::ShimHello h = GoodHello();
  h.set_job("bad job!");
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.job");
  h = GoodHello();
  h.set_world_size(0);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.world_size");
  h = GoodHello();
  h.mutable_rank()->set_rank(8);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.rank.rank");
  h = GoodHello();
  h.mutable_rank()->set_pid(0);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.rank.pid");
  h = GoodHello();
  h.set_dp_size(2);
  h.mutable_rank()->set_dp_index(2);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.rank.dp_index");
  h = GoodHello();
  h.clear_rank();
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.rank");
}

TEST(ShimValidationTest, PipelineShapeIsUnknownOrInRange) {
  v1::ShimHello h = GoodHello();
  h.set_pp_size(4);
  for (uint32_t blocks : {0u, 4u, 4096u}) {
    h.set_pipeline_blocks(blocks);
    EXPECT_TRUE(ValidateShimHello(h).ok()) << blocks;
  }
  h.set_block_state_bytes(common::kMaxBlockStateBytes);
  EXPECT_TRUE(ValidateShimHello(h).ok());
  h.set_pipeline_blocks(3);  // Fewer blocks than stages.
  absl::Status s = ValidateShimHello(h);
  EXPECT_EQ(FieldOf(s), "hello.pipeline_blocks");
  EXPECT_NE(s.message().find("3 is not 0 (unknown) or in [4 (pp_size), 4096]"), std::string::npos)
      << s;
  h.set_pipeline_blocks(4097);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.pipeline_blocks");
  h.set_pipeline_blocks(4);
  h.set_block_state_bytes(common::kMaxBlockStateBytes + 1);
  EXPECT_EQ(FieldOf(ValidateShimHello(h)), "hello.block_state_bytes");
}

TEST(ShimValidationTest, CommunicatorMembers) {
  v1::Communicator c;
  c.set_comm_id(9);
  c.add_member_ranks(3);
  c.add_member_ranks(4);
  EXPECT_TRUE(ValidateCommunicator(c, 8, 3).ok());
  EXPECT_EQ(FieldOf(ValidateCommunicator(c, 8, 5)), "communicator.member_ranks");
  c.add_member_ranks(3);
  EXPECT_EQ(FieldOf(ValidateCommunicator(c, 8, 3)), "communicator.member_ranks[2]");
  c.set_comm_id(0);
  EXPECT_EQ(FieldOf(ValidateCommunicator(c, 8, 3)), "communicator.comm_id");
}

class OpBatchTest : public ::testing::Test {
 protected:
  OpBatchTest() {
    comm_.set_comm_id(9);
    comm_.add_member_ranks(0);
    comm_.add_member_ranks(1);
    ctx_.world_size = 4;
    ctx_.self_rank = 0;
  }
  v1::OpRecord* Add(v1::OpBatch& b, uint64_t seq) {
    v1::OpRecord* r = b.add_records();
    r->set_comm_id(9);
    r->set_op_kind(v1::OP_KIND_ALL_REDUCE);
    r->set_peer(-1);
    r->set_host_start_ns(100);
    r->set_host_end_ns(200);
    r->set_seq(seq);
    r->set_iteration(-1);
    return r;
  }
  absl::Status Check(const v1::OpBatch& b) {
    return ValidateOpBatch(b, ctx_, [this](uint64_t id) -> const v1::Communicator* {
      return id == comm_.comm_id() ? &comm_ : nullptr;
    });
  }
  v1::Communicator comm_;
  OpBatchContext ctx_;
};

TEST_F(OpBatchTest, GoodBatchPasses) {
  v1::OpBatch b;
  b.set_sequence(1);
  Add(b, 1);
  v1::OpRecord* send = Add(b, 2);
  send->set_op_kind(v1::OP_KIND_SEND);
  send->set_peer(1);
  EXPECT_TRUE(Check(b).ok());
}

TEST_F(OpBatchTest, EachBadFieldIsNamedWithItsIndex) {
  v1::OpBatch b;
  b.set_sequence(1);
  Add(b, 1);
  Add(b, 2)->set_host_end_ns(50);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[1].host_end_ns");
  b.mutable_records(1)->set_host_end_ns(300);
  b.mutable_records(1)->set_comm_id(77);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[1].comm_id");
  b.mutable_records(1)->set_comm_id(9);
  b.mutable_records(1)->set_seq(1);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[1].seq");
  b.mutable_records(1)->set_seq(2);
  b.mutable_records(1)->set_op_kind(v1::OP_KIND_RECV);
  b.mutable_records(1)->set_peer(2);  // Not a member.
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[1].peer");
  b.mutable_records(1)->set_op_kind(v1::OP_KIND_UNSPECIFIED);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[1].op_kind");
  b.set_sequence(0);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.sequence");
}

TEST_F(OpBatchTest, SeqMustIncreaseAcrossBatches) {
  ctx_.last_op_seq = 10;
  v1::OpBatch b;
  b.set_sequence(2);
  Add(b, 10);
  EXPECT_EQ(FieldOf(Check(b)), "op_batch.records[0].seq");
}

TEST(ShimValidationTest, HintsAcksAndResults) {
  v1::IterationHint h;
  h.set_iteration(5);
  h.set_start_ns(10);
  h.set_end_ns(20);
  EXPECT_TRUE(ValidateIterationHint(h, 4).ok());
  EXPECT_EQ(FieldOf(ValidateIterationHint(h, 5)), "iteration.iteration");
  h.set_end_ns(5);
  EXPECT_EQ(FieldOf(ValidateIterationHint(h, -1)), "iteration.end_ns");

  v1::DirectiveAck a;
  a.set_directive_id(1);
  a.set_job("j");
  a.set_rank(2);
  a.set_status(v1::ACK_STATUS_REJECTED);
  EXPECT_EQ(FieldOf(ValidateDirectiveAck(a, "j", 2)), "directive_ack.reason");
  a.set_reason("stale epoch");
  EXPECT_TRUE(ValidateDirectiveAck(a, "j", 2).ok());
  EXPECT_EQ(FieldOf(ValidateDirectiveAck(a, "j", 3)), "directive_ack.rank");

  v1::ValidationResult r;
  r.set_task_id(1);
  r.set_job("j");
  r.set_rank(2);
  EXPECT_TRUE(ValidateValidationResult(r, "j", 2).ok());
  EXPECT_EQ(FieldOf(ValidateValidationResult(r, "k", 2)), "validation_result.job");
}

TEST(ShimValidationTest, FieldErrorSplitsFieldAndMessage) {
  v1::FieldError e = ToFieldError(absl::InvalidArgumentError("op_batch.sequence: must be > 0"));
  EXPECT_EQ(e.field(), "op_batch.sequence");
  EXPECT_EQ(e.message(), "must be > 0");
  e = ToFieldError(absl::InvalidArgumentError("something odd happened: really"));
  EXPECT_EQ(e.field(), "msg");
}

}  // namespace
}  // namespace falcon::agent
