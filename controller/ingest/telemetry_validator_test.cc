#include "controller/ingest/telemetry_validator.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/telemetry_batch.h"
#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::ingest {
namespace {

using falcon::v1::TelemetryBatch;
using testing::LayoutSpec;

class TelemetryValidatorTest : public ::testing::Test {
 protected:
  TelemetryValidatorTest() {
    spec_.dp = 2;
    spec_.pp = 2;
    store::StoreTxn txn;
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      EXPECT_FALSE(registry_
                       .Register(testing::NodeName(n), testing::NodeName(n),
                                 testing::NodeRegistration(spec_, n), "reg", &txn)
                       .has_value());
    }
  }
  const registry::JobEntry& job() { return *registry_.Find("job"); }

  TelemetryBatch ValidBatch() {
    TelemetryBatch b;
    b.set_sequence(1);
    b.set_job("job");
    for (int64_t it = 0; it < 3; ++it) {
      *b.add_iterations() = testing::MakeSummary(spec_, 0, it, 1'000'000);
      *b.add_iterations() = testing::MakeSummary(spec_, 1, it, 1'000'000);
    }
    b.set_op_rank(0);
    for (uint64_t s = 1; s <= 3; ++s) {
      falcon::v1::OpRecord* op = b.add_ops();
      op->set_comm_id(1000);
      op->set_op_kind(falcon::v1::OP_KIND_ALL_REDUCE);
      op->set_bytes(1 << 20);
      op->set_peer(-1);
      op->set_host_start_ns(100 * s);
      op->set_host_end_ns(100 * s + 50);
      op->set_seq(s);
      op->set_iteration(-1);
    }
    falcon::v1::OpRecord* p2p = b.add_ops();
    p2p->set_comm_id(2000);
    p2p->set_op_kind(falcon::v1::OP_KIND_SEND);
    p2p->set_peer(2);
    p2p->set_host_start_ns(1000);
    p2p->set_host_end_ns(1001);
    p2p->set_seq(4);
    p2p->set_iteration(3);
    return b;
  }

  LayoutSpec spec_;
  registry::JobRegistry registry_;
  IngestLimits limits_;
};

TEST_F(TelemetryValidatorTest, ValidBatchPasses) {
  TelemetryBatch b = ValidBatch();
  EXPECT_FALSE(ValidateBatchEnvelope(b, limits_).has_value());
  util::MaybeFieldError e = ValidateBatchData(b, job(), limits_);
  EXPECT_FALSE(e.has_value()) << e->field() << ": " << e->message();
}

TEST_F(TelemetryValidatorTest, EnvelopeErrorsNameTheField) {
  struct Case {
    std::function<void(TelemetryBatch*)> mutate;
    std::string field;
  };
  IngestLimits small = limits_;
  small.max_iterations_per_batch = 2;
  small.max_ops_per_batch = 2;
  std::vector<Case> cases = {
      {[](TelemetryBatch* b) { b->set_sequence(0); }, "batch.sequence"},
      {[](TelemetryBatch* b) { b->set_job("a/b"); }, "batch.job"},
      {[](TelemetryBatch* b) { b->set_job(""); }, "batch.job"},
      {[](TelemetryBatch*) {}, "batch.iterations"},
      {[](TelemetryBatch* b) { b->clear_iterations(); }, "batch.ops"},
      {[this](TelemetryBatch* b) {
         b->clear_iterations();
         b->clear_ops();
         *b->mutable_registration() = testing::NodeRegistration(spec_, 0);
         b->mutable_registration()->set_job("other");
       },
       "batch.registration.job"},
      {[this](TelemetryBatch* b) {
         b->clear_iterations();
         b->clear_ops();
         *b->mutable_registration() = testing::NodeRegistration(spec_, 0);
         b->mutable_registration()->set_world_size(0);
       },
       "batch.registration.world_size"},
  };
  for (const Case& c : cases) {
    TelemetryBatch b = ValidBatch();
    c.mutate(&b);
    util::MaybeFieldError e = ValidateBatchEnvelope(b, small);
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field(), c.field) << e->message();
  }
}

TEST_F(TelemetryValidatorTest, DataErrorsNameTheField) {
  struct Case {
    std::function<void(TelemetryBatch*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](TelemetryBatch* b) { b->mutable_iterations(1)->set_rank(9); },
       "batch.iterations[1].rank"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_iteration(-1); },
       "batch.iterations[0].iteration"},
      {[](TelemetryBatch* b) { b->mutable_iterations(2)->set_iteration(0); },
       "batch.iterations[2].iteration"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_start_ns(-5); },
       "batch.iterations[0].start_ns"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_iteration_time_ns(0); },
       "batch.iterations[0].iteration_time_ns"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_iteration_time_ns(-1); },
       "batch.iterations[0].iteration_time_ns"},
      {[](TelemetryBatch* b) {
         b->mutable_iterations(0)->set_iteration_time_ns(3'600'000'000'001);
       },
       "batch.iterations[0].iteration_time_ns"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_compute_ns(2'000'000); },
       "batch.iterations[0].compute_ns"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->set_plan_version(-1); },
       "batch.iterations[0].plan_version"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->mutable_comms(0)->set_comm_id(77); },
       "batch.iterations[0].comms[0].comm_id"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->mutable_comms(0)->set_comm_id(1001); },
       "batch.iterations[0].comms[0].comm_id"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->mutable_comms(0)->set_busy_ns(-1); },
       "batch.iterations[0].comms[0].busy_ns"},
      {[](TelemetryBatch* b) {
         b->mutable_iterations(0)->mutable_comms(0)->set_wait_ns(1'000'000'000);
       },
       "batch.iterations[0].comms[0].wait_ns"},
      {[](TelemetryBatch* b) { b->mutable_iterations(0)->mutable_comms(0)->set_transfer_ns(-2); },
       "batch.iterations[0].comms[0].transfer_ns"},
      {[](TelemetryBatch* b) { b->set_op_rank(5); }, "batch.op_rank"},
      {[](TelemetryBatch* b) { b->mutable_ops(1)->set_comm_id(4242); }, "batch.ops[1].comm_id"},
      {[](TelemetryBatch* b) { b->mutable_ops(1)->set_comm_id(1001); }, "batch.ops[1].comm_id"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_op_kind(falcon::v1::OP_KIND_UNSPECIFIED); },
       "batch.ops[0].op_kind"},
      {[](TelemetryBatch* b) {
         b->mutable_ops(0)->set_op_kind(static_cast<falcon::v1::OpKind>(99));
       },
       "batch.ops[0].op_kind"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_bytes((1ull << 40) + 1); },
       "batch.ops[0].bytes"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_peer(1); }, "batch.ops[0].peer"},
      {[](TelemetryBatch* b) { b->mutable_ops(3)->set_peer(0); }, "batch.ops[3].peer"},
      {[](TelemetryBatch* b) { b->mutable_ops(3)->set_peer(1); }, "batch.ops[3].peer"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_host_start_ns(-1); },
       "batch.ops[0].host_start_ns"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_host_end_ns(1); },
       "batch.ops[0].host_end_ns"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_host_end_ns(int64_t{1} << 62); },
       "batch.ops[0].host_end_ns"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_device_duration_ns(-3); },
       "batch.ops[0].device_duration_ns"},
      {[](TelemetryBatch* b) { b->mutable_ops(2)->set_seq(1); }, "batch.ops[2].seq"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_seq(0); }, "batch.ops[0].seq"},
      {[](TelemetryBatch* b) { b->mutable_ops(0)->set_iteration(-2); }, "batch.ops[0].iteration"},
  };
  for (const Case& c : cases) {
    TelemetryBatch b = ValidBatch();
    c.mutate(&b);
    util::MaybeFieldError e = ValidateBatchData(b, job(), limits_);
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field(), c.field) << e->message();
    EXPECT_FALSE(e->message().empty());
  }
}

// A node's ranks' ops in one batch (RankOps): each checked as batch.ops is, errors naming
// batch.rank_ops[k]; a rank at most once (with op_rank's); the op limit counts them all.
TEST_F(TelemetryValidatorTest, RankOpsAreCheckedPerRankAndNameTheirField) {
  auto with_rank_ops = [this]() {
    TelemetryBatch b = ValidBatch();  // Rank 0's ops as batch.ops.
    TelemetryBatch rank0 = ValidBatch();
    falcon::v1::RankOps* ro = b.add_rank_ops();
    ro->set_rank(1);  // Rank 1: a member of comm 1000 (its stage's DP group).
    for (int i = 0; i < 3; ++i) *ro->add_ops() = rank0.ops(i);
    falcon::v1::RankOps* other = b.add_rank_ops();
    other->set_rank(3);
    falcon::v1::OpRecord* op = other->add_ops();
    *op = rank0.ops(0);
    op->set_comm_id(1001);  // Stage 1's DP group: ranks 2 and 3.
    return b;
  };
  TelemetryBatch ok = with_rank_ops();
  util::MaybeFieldError e = ValidateBatchData(ok, job(), limits_);
  EXPECT_FALSE(e.has_value()) << e->field() << ": " << e->message();
  EXPECT_EQ(common::OpRecordCount(ok), 8);
  struct Case {
    std::function<void(TelemetryBatch*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](TelemetryBatch* b) { b->mutable_rank_ops(1)->set_rank(9); }, "batch.rank_ops[1].rank"},
      {[](TelemetryBatch* b) { b->mutable_rank_ops(0)->set_rank(0); }, "batch.rank_ops[0].rank"},
      {[](TelemetryBatch* b) { b->mutable_rank_ops(1)->set_rank(1); }, "batch.rank_ops[1].rank"},
      {[](TelemetryBatch* b) { b->mutable_rank_ops(1)->mutable_ops(0)->set_comm_id(1000); },
       "batch.rank_ops[1].ops[0].comm_id"},
      {[](TelemetryBatch* b) { b->mutable_rank_ops(0)->mutable_ops(2)->set_seq(1); },
       "batch.rank_ops[0].ops[2].seq"},
      {[](TelemetryBatch* b) { b->mutable_rank_ops(0)->mutable_ops(1)->set_peer(0); },
       "batch.rank_ops[0].ops[1].peer"},
  };
  for (const Case& c : cases) {
    TelemetryBatch b = with_rank_ops();
    c.mutate(&b);
    util::MaybeFieldError err = ValidateBatchData(b, job(), limits_);
    ASSERT_TRUE(err.has_value()) << c.field;
    EXPECT_EQ(err->field(), c.field) << err->message();
  }
  IngestLimits small = limits_;
  small.max_ops_per_batch = 7;
  TelemetryBatch big = with_rank_ops();
  e = ValidateBatchEnvelope(big, small);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.ops+batch.rank_ops");  // 4 in ops, 4 in rank_ops.
  EXPECT_NE(e->message().find("8 op records exceed the limit 7"), std::string::npos)
      << e->message();
  big.clear_ops();
  for (int i = 0; i < 4; ++i) *big.mutable_rank_ops(0)->add_ops() = big.rank_ops(0).ops(0);
  e = ValidateBatchEnvelope(big, small);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.rank_ops");
  // Named where the records are: an empty rank_ops entry beside too many ops is batch.ops.
  TelemetryBatch flat = with_rank_ops();
  for (const auto& ro : flat.rank_ops()) {
    for (const auto& op : ro.ops()) *flat.add_ops() = op;
  }
  for (auto& ro : *flat.mutable_rank_ops()) ro.clear_ops();
  e = ValidateBatchEnvelope(flat, small);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.ops");
  *flat.mutable_rank_ops(0)->add_ops() = flat.ops(0);
  e = ValidateBatchEnvelope(flat, small);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.ops+batch.rank_ops");
}

TEST_F(TelemetryValidatorTest, HelloAndValidationResultAndAck) {
  falcon::v1::AgentHello hello;
  hello.set_agent_id("a");
  hello.set_node("n");
  *hello.add_jobs() = testing::NodeRegistration(spec_, 0);
  EXPECT_FALSE(ValidateHello(hello).has_value());
  *hello.add_jobs() = testing::NodeRegistration(spec_, 1);
  EXPECT_EQ(ValidateHello(hello)->field(), "hello.jobs[1].job");
  hello.mutable_jobs(1)->set_world_size(0);
  EXPECT_EQ(ValidateHello(hello)->field(), "hello.jobs[1].world_size");
  hello.set_agent_id("");
  EXPECT_EQ(ValidateHello(hello)->field(), "hello.agent_id");

  falcon::v1::ValidationResult r;
  r.set_task_id(1);
  r.set_job("job");
  r.set_rank(1);
  r.set_gemm_duration_ns(5);
  EXPECT_FALSE(ValidateValidationResult(r, &job(), limits_).has_value());
  EXPECT_EQ(ValidateValidationResult(r, nullptr, limits_)->field(), "validation_result.job");
  falcon::v1::LinkTiming* l = r.add_links();
  l->mutable_link()->set_src_rank(1);
  l->mutable_link()->set_dst_rank(1);
  l->set_duration_ns(10);
  EXPECT_EQ(ValidateValidationResult(r, &job(), limits_)->field(),
            "validation_result.links[0].link.dst_rank");
  l->mutable_link()->set_dst_rank(2);
  l->set_duration_ns(0);
  EXPECT_EQ(ValidateValidationResult(r, &job(), limits_)->field(),
            "validation_result.links[0].duration_ns");
  r.set_gemm_flops(std::nan(""));
  EXPECT_EQ(ValidateValidationResult(r, &job(), limits_)->field(), "validation_result.gemm_flops");

  falcon::v1::DirectiveAck ack;
  ack.set_directive_id(3);
  ack.set_job("job");
  ack.set_rank(2);
  ack.set_status(falcon::v1::ACK_STATUS_APPLIED);
  ack.set_applied_iteration(7);
  EXPECT_FALSE(ValidateDirectiveAck(ack, &job()).has_value());
  ack.set_status(falcon::v1::ACK_STATUS_REJECTED);
  EXPECT_EQ(ValidateDirectiveAck(ack, &job())->field(), "directive_ack.reason");
  ack.set_rank(17);
  EXPECT_EQ(ValidateDirectiveAck(ack, &job())->field(), "directive_ack.rank");
}

}  // namespace
}  // namespace falcon::controller::ingest
