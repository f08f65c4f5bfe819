// The C ABI end to end, against FakeAgent.
#include "trainer_shim/falcon_shim.h"

#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "trainer_shim/fake_agent.h"

extern "C" int32_t falcon_shim_abi_check_poll_from_c(int64_t iteration);
extern "C" int32_t falcon_shim_abi_check_record_from_c(uint64_t comm_id);

namespace falcon::trainer_shim {
namespace {

constexpr uint64_t kComm = 99;

struct DirectiveLog {
  std::vector<uint32_t> micro_batches;
  std::vector<uint32_t> assignment_ranks;
  std::vector<uint32_t> stage_blocks;
  uint32_t pp_stages = 0;
  int64_t plan_version = 0;
  int32_t kind = 0;
  falcon::v1::Directive parsed;
};

int32_t ApplyDirective(void* user, const falcon_shim_directive* d, char* reason, uint32_t cap) {
  auto* log = static_cast<DirectiveLog*>(user);
  log->kind = d->kind;
  log->plan_version = d->plan_version;
  log->micro_batches.assign(d->micro_batches, d->micro_batches + d->micro_batches_len);
  for (uint32_t i = 0; i < d->assignments_len; ++i) {
    log->assignment_ranks.push_back(d->assignments[i].rank);
  }
  if (d->struct_size >= offsetof(falcon_shim_directive, pp_stages) + sizeof(d->pp_stages)) {
    log->stage_blocks.assign(d->stage_blocks, d->stage_blocks + d->stage_blocks_len);
    log->pp_stages = d->pp_stages;
  }
  log->parsed.ParseFromArray(d->serialized, static_cast<int>(d->serialized_len));
  if (d->kind == FALCON_SHIM_DIRECTIVE_TOPOLOGY_CHANGE) {
    std::snprintf(reason, cap, "cannot remap ranks mid-run");
    return 1;
  }
  return 0;
}

int32_t RunValidation(void* user, const falcon_shim_validation_task* t,
                      falcon_shim_validation_result* r) {
  *static_cast<int*>(user) += 1;
  if (t->kind != FALCON_SHIM_VALIDATION_LINK_PASS) {
    std::snprintf(r->error, r->error_capacity, "only link tests here");
    return 1;
  }
  for (uint32_t i = 0; i < t->links_len && i < r->link_timings_capacity; ++i) {
    r->link_timings[i].link = t->links[i];
    r->link_timings[i].duration_ns = 1000 + t->links[i].dst_rank;
    r->link_timings[i].bytes = t->link_bytes;
  }
  r->link_timings_len = t->links_len;
  return 0;
}

void OnPause(void* user, int32_t paused) {
  static_cast<std::vector<int>*>(user)->push_back(paused);
}

bool HasAck(const FakeAgent& agent, uint64_t id, falcon::v1::AckStatus status,
            std::string* reason = nullptr) {
  for (const auto& a : agent.acks()) {
    if (a.directive_id() == id && a.status() == status) {
      if (reason != nullptr) *reason = a.reason();
      return true;
    }
  }
  return false;
}

class FalconShimCTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = TestSocketPath("c_agent.sock");
    auto agent = FakeAgent::Start(socket_);
    ASSERT_TRUE(agent.ok());
    agent_ = *std::move(agent);
    falcon_shim_options o;
    falcon_shim_options_init(&o);
    o.node = "node-c";
    o.epoch = 2;
    o.dp_size = 2;
    o.pp_size = 2;
    o.pipeline_blocks = 8;
    o.block_state_bytes = 3 << 20;
    o.flush_interval_us = 2000;
    o.reconnect_initial_ms = 5;
    o.reconnect_max_ms = 40;
    ASSERT_EQ(falcon_shim_init("cjob", 2, 4, socket_.c_str(), &o), FALCON_SHIM_OK)
        << falcon_shim_last_error();
    const uint32_t members[] = {0, 2};
    ASSERT_EQ(falcon_shim_register_comm(kComm, FALCON_SHIM_COMM_PP, members, 2, "pp"),
              FALCON_SHIM_OK);
    ASSERT_TRUE(agent_->WaitFor([&] { return agent_->communicators().size() == 1; }));
  }
  void TearDown() override { falcon_shim_shutdown(); }

  std::string socket_;
  std::unique_ptr<FakeAgent> agent_;
};

TEST_F(FalconShimCTest, RecordsFlowAndStatsAddUp) {
  EXPECT_EQ(falcon_shim_abi_version(), 4u);
  EXPECT_EQ(falcon_shim_poll_directives(4, nullptr, nullptr), FALCON_SHIM_OK);
  for (int i = 0; i < 50; ++i) {
    falcon_shim_op op{};
    op.comm_id = kComm;
    op.op_kind = FALCON_SHIM_OP_SEND;
    op.peer = 0;
    op.bytes = 128;
    op.iteration = -1;
    op.host_start_ns = falcon_shim_now_ns();
    op.host_end_ns = op.host_start_ns + 10;
    ASSERT_EQ(falcon_shim_record_op(&op), FALCON_SHIM_OK);
  }
  EXPECT_EQ(falcon_shim_abi_check_record_from_c(kComm), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_iteration(4, 1, 2, 0.5, 0), FALCON_SHIM_OK);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 51; }));
  const auto records = agent_->acked_records();
  EXPECT_EQ(records[0].op_kind(), falcon::v1::OP_KIND_SEND);
  EXPECT_EQ(records[0].iteration(), 4);
  EXPECT_EQ(records[50].op_kind(), falcon::v1::OP_KIND_ALL_GATHER);
  EXPECT_EQ(agent_->communicators()[0].kind(), falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(agent_->hellos()[0].rank().node(), "node-c");
  EXPECT_EQ(agent_->hellos()[0].epoch(), 2u);
  EXPECT_EQ(agent_->hellos()[0].pipeline_blocks(), 8u);
  EXPECT_EQ(agent_->hellos()[0].block_state_bytes(), 3u << 20);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 1; }));

  falcon_shim_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(falcon_shim_get_stats(&s), FALCON_SHIM_OK);
  EXPECT_EQ(s.records_accepted, 51u);
  EXPECT_EQ(s.connected, 1);
  EXPECT_EQ(s.epoch, 2u);
  // An older caller with a shorter struct gets only what it knows.
  falcon_shim_stats old{};
  old.struct_size = offsetof(falcon_shim_stats, records_accepted);
  old.records_accepted = 12345;
  ASSERT_EQ(falcon_shim_get_stats(&old), FALCON_SHIM_OK);
  EXPECT_EQ(old.records_accepted, 12345u);
  EXPECT_EQ(old.epoch, 2u);
}

// The NCCL profiler plugin's path: a handle opened (plugin init), bound by the interposer, its
// transfers and ops mapped to the Falcon comm and global peer ranks; unbound ones counted.
TEST_F(FalconShimCTest, PeerTransfersOfABoundProfilerCommReachTheAgent) {
  falcon_shim_peer_transfer t{};
  t.struct_size = sizeof(t);
  t.op_kind = FALCON_SHIM_OP_PEER_SEND;
  t.nccl_comm = 0xabc;
  t.peer = 0;
  t.channels = 2;
  t.bytes = 1 << 20;
  t.start_ns = 1000;
  t.end_ns = 5000;
  t.busy_ns = 3000;
  t.iteration = 7;
  ASSERT_EQ(falcon_shim_nccl_comm_open(0xabc, 2, 1), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_nccl_comm_bound(0xabc), 0);
  // Not bound yet: dropped and counted.
  EXPECT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_FAILED_PRECONDITION);
  const uint32_t members[] = {0, 2};
  ASSERT_EQ(falcon_shim_nccl_comm_bind(2, 1, kComm, members, 2), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_nccl_comm_bound(0xabc), 1);
  ASSERT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_OK) << falcon_shim_last_error();
  falcon_shim_op op{};
  op.op_kind = FALCON_SHIM_OP_RECV;
  op.peer = 0;  // Communicator rank 0 = global rank 0.
  op.bytes = 64;
  op.iteration = 7;
  op.host_start_ns = 10;
  op.host_end_ns = 20;
  ASSERT_EQ(falcon_shim_record_nccl_op(0xabc, &op), FALCON_SHIM_OK) << falcon_shim_last_error();
  // Bad input names the field.
  t.peer = 2;
  EXPECT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_FAILED_PRECONDITION);
  t.peer = 0;
  t.busy_ns = 9000;
  EXPECT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("busy_ns"), std::string::npos);
  t.busy_ns = 0;
  t.start_ns = -1;  // end_ns - start_ns would overflow.
  t.end_ns = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("end_ns"), std::string::npos);
  t.start_ns = 1000;
  t.end_ns = 5000;
  // This rank itself (communicator rank 1): the agent would refuse the whole batch.
  t.peer = 1;
  EXPECT_EQ(falcon_shim_record_peer_transfer(&t), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("peer"), std::string::npos);
  op.op_kind = FALCON_SHIM_OP_SEND;  // NCCL allows a send to oneself.
  op.peer = 1;
  EXPECT_EQ(falcon_shim_record_nccl_op(0xabc, &op), FALCON_SHIM_INVALID_ARGUMENT);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 2; }));
  const auto records = agent_->acked_records();
  EXPECT_EQ(records[0].op_kind(), falcon::v1::OP_KIND_PEER_SEND);
  EXPECT_EQ(records[0].comm_id(), kComm);
  EXPECT_EQ(records[0].peer(), 0);
  EXPECT_EQ(records[0].bytes(), 1u << 20);
  EXPECT_EQ(records[0].device_duration_ns(), 3000);
  EXPECT_EQ(records[1].op_kind(), falcon::v1::OP_KIND_RECV);
  EXPECT_EQ(records[1].comm_id(), kComm);
  falcon_shim_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(falcon_shim_get_stats(&s), FALCON_SHIM_OK);
  EXPECT_EQ(s.records_unbound, 2u);
  EXPECT_EQ(falcon_shim_nccl_comm_close(0xabc), FALCON_SHIM_OK);
}

TEST_F(FalconShimCTest, ErrorsAreReportedNotThrown) {
  falcon_shim_op op{};
  op.comm_id = kComm;
  op.op_kind = 0;
  EXPECT_EQ(falcon_shim_record_op(&op), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("op_kind"), std::string::npos);
  EXPECT_EQ(falcon_shim_record_op(nullptr), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_EQ(falcon_shim_register_comm(kComm, FALCON_SHIM_COMM_DP, nullptr, 3, ""),
            FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_EQ(falcon_shim_init("cjob", 0, 1, "", nullptr), FALCON_SHIM_FAILED_PRECONDITION);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("already"), std::string::npos);
  EXPECT_EQ(falcon_shim_poll_directives(-5, nullptr, nullptr), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_EQ(falcon_shim_get_stats(nullptr), FALCON_SHIM_INVALID_ARGUMENT);
}

TEST_F(FalconShimCTest, DirectivesReachCCallbacksAndAreAcked) {
  falcon::v1::Directive plan;
  plan.set_directive_id(1);
  plan.set_job("cjob");
  plan.set_epoch(2);
  plan.set_effective_iteration(3);
  plan.set_plan_version(4);
  plan.mutable_micro_batch_plan()->add_micro_batches(3);
  plan.mutable_micro_batch_plan()->add_micro_batches(5);
  falcon::v1::Directive topo = plan;
  topo.set_directive_id(2);
  topo.set_effective_iteration(4);
  for (uint32_t r = 0; r < 4; ++r) topo.mutable_topology_change()->add_assignments()->set_rank(r);
  ASSERT_TRUE(agent_->SendDirective(plan));
  ASSERT_TRUE(agent_->SendDirective(topo));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 2, falcon::v1::ACK_STATUS_RECEIVED); }));
  DirectiveLog log;
  ASSERT_EQ(falcon_shim_poll_directives(3, ApplyDirective, &log), FALCON_SHIM_OK);
  EXPECT_EQ(log.kind, FALCON_SHIM_DIRECTIVE_MICRO_BATCH_PLAN);
  EXPECT_EQ(log.micro_batches, (std::vector<uint32_t>{3, 5}));
  EXPECT_EQ(log.plan_version, 4);
  EXPECT_EQ(log.parsed.directive_id(), 1u) << "the wire bytes parse back";
  ASSERT_EQ(falcon_shim_poll_directives(4, ApplyDirective, &log), FALCON_SHIM_OK);
  EXPECT_EQ(log.assignment_ranks, (std::vector<uint32_t>{0, 1, 2, 3}));
  std::string reason;
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 1, falcon::v1::ACK_STATUS_APPLIED) &&
           HasAck(*agent_, 2, falcon::v1::ACK_STATUS_REJECTED, &reason);
  }));
  EXPECT_NE(reason.find("cannot remap ranks mid-run"), std::string::npos) << reason;
  EXPECT_EQ(falcon_shim_abi_check_poll_from_c(5), FALCON_SHIM_OK);
}

// Agreed directives: the pending job-wide ids, then a poll that applies only the agreed ones
// (late or not); the plain poll (an NCCL interposer's safe point) leaves them alone.
TEST(FalconShimCAgreedTest, OnlyTheAgreedDirectivesAreAppliedLateOrNot) {
  const std::string socket = TestSocketPath("c_agreed.sock");
  auto agent = FakeAgent::Start(socket);
  ASSERT_TRUE(agent.ok());
  falcon_shim_options o;
  falcon_shim_options_init(&o);
  EXPECT_EQ(o.agreed_directives, 0);
  o.agreed_directives = 1;
  o.epoch = 2;
  o.dp_size = 2;
  o.reconnect_initial_ms = 5;
  ASSERT_EQ(falcon_shim_init("cjob", 2, 4, socket.c_str(), &o), FALCON_SHIM_OK);
  ASSERT_EQ(falcon_shim_poll_agreed(5, nullptr, 0, ApplyDirective, nullptr), FALCON_SHIM_OK);
  ASSERT_TRUE((*agent)->WaitFor([&] { return (*agent)->attached(); }));
  falcon::v1::Directive plan;
  plan.set_directive_id(7);
  plan.set_job("cjob");
  plan.set_epoch(2);
  plan.set_effective_iteration(5);  // Already begun on this rank: late, but not rejected.
  plan.set_plan_version(1);
  plan.mutable_micro_batch_plan()->add_micro_batches(3);
  plan.mutable_micro_batch_plan()->add_micro_batches(5);
  falcon::v1::Directive other = plan;
  other.set_directive_id(9);
  ASSERT_TRUE((*agent)->SendDirective(plan));
  ASSERT_TRUE((*agent)->SendDirective(other));
  ASSERT_TRUE(
      (*agent)->WaitFor([&] { return HasAck(**agent, 9, falcon::v1::ACK_STATUS_RECEIVED); }));
  EXPECT_TRUE(HasAck(**agent, 7, falcon::v1::ACK_STATUS_RECEIVED));
  uint64_t ids[1] = {0};
  int64_t effective[1] = {0};
  uint32_t count = 0;
  ASSERT_EQ(falcon_shim_pending_directives(ids, effective, 1, &count), FALCON_SHIM_OK);
  EXPECT_EQ(count, 2u) << "two held, one fits";
  EXPECT_EQ(ids[0], 7u);
  EXPECT_EQ(effective[0], 5);
  EXPECT_EQ(falcon_shim_pending_directives(nullptr, nullptr, 1, &count),
            FALCON_SHIM_INVALID_ARGUMENT);
  DirectiveLog log;
  ASSERT_EQ(falcon_shim_poll_directives(-1, ApplyDirective, &log), FALCON_SHIM_OK);
  EXPECT_EQ(log.kind, 0) << "a plain safe point applies no job-wide directive";
  const uint64_t agreed[] = {7};
  ASSERT_EQ(falcon_shim_poll_agreed(6, agreed, 1, ApplyDirective, &log), FALCON_SHIM_OK);
  EXPECT_EQ(log.parsed.directive_id(), 7u);
  ASSERT_TRUE((*agent)->WaitFor([&] {
    for (const auto& a : (*agent)->acks()) {
      if (a.directive_id() == 7 && a.status() == falcon::v1::ACK_STATUS_APPLIED) {
        return a.applied_iteration() == 6;
      }
    }
    return false;
  }));
  EXPECT_FALSE(HasAck(**agent, 9, falcon::v1::ACK_STATUS_REJECTED)) << "9 waits, not late";
  ASSERT_EQ(falcon_shim_pending_directives(ids, effective, 1, &count), FALCON_SHIM_OK);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(ids[0], 9u);
  EXPECT_EQ(falcon_shim_poll_agreed(7, nullptr, 1, ApplyDirective, &log),
            FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
}

// S2L: the split reaches the callback flattened DP-major with its micro-batch plan; one that does
// not fit the shape the shim was given is rejected before the trainer sees it.
TEST_F(FalconShimCTest, LayerSplitsReachCCallbacksFlattened) {
  falcon::v1::Directive d;
  d.set_directive_id(30);
  d.set_job("cjob");
  d.set_epoch(2);
  d.set_effective_iteration(6);
  d.set_plan_version(7);
  falcon::v1::LayerSplit* split = d.mutable_layer_split();
  for (uint32_t b : {3u, 5u}) split->add_replicas()->add_stage_blocks(b);
  split->mutable_replicas(0)->add_stage_blocks(5);
  split->mutable_replicas(1)->add_stage_blocks(3);  // 3+5 and 5+3.
  split->add_micro_batches(4);
  split->add_micro_batches(2);
  falcon::v1::Directive bad = d;
  bad.set_directive_id(31);
  bad.mutable_layer_split()->mutable_replicas(1)->set_stage_blocks(1, 4);  // 5+4: not 8 blocks.
  ASSERT_TRUE(agent_->SendDirective(d));
  ASSERT_TRUE(agent_->SendDirective(bad));
  std::string reason;
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 30, falcon::v1::ACK_STATUS_RECEIVED) &&
           HasAck(*agent_, 31, falcon::v1::ACK_STATUS_REJECTED, &reason);
  }));
  EXPECT_NE(reason.find("layer_split.replicas[1].stage_blocks sum to 9, not the 8 blocks"),
            std::string::npos)
      << reason;
  DirectiveLog log;
  ASSERT_EQ(falcon_shim_poll_directives(6, ApplyDirective, &log), FALCON_SHIM_OK);
  EXPECT_EQ(log.kind, FALCON_SHIM_DIRECTIVE_LAYER_SPLIT);
  EXPECT_EQ(log.plan_version, 7);
  EXPECT_EQ(log.micro_batches, (std::vector<uint32_t>{4, 2}));
  EXPECT_EQ(log.pp_stages, 2u);
  EXPECT_EQ(log.stage_blocks, (std::vector<uint32_t>{3, 5, 5, 3}));
  EXPECT_EQ(log.parsed.layer_split().replicas_size(), 2);
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 30, falcon::v1::ACK_STATUS_APPLIED); }));
}

// The pipeline shape is checked at init, naming the field.
TEST(FalconShimCOptionsTest, PipelineShapeOutOfRangeIsRefused) {
  falcon_shim_options o;
  falcon_shim_options_init(&o);
  EXPECT_EQ(o.pipeline_blocks, 0u);
  EXPECT_EQ(o.block_state_bytes, 0u);
  o.pp_size = 4;
  o.pipeline_blocks = 2;
  EXPECT_EQ(falcon_shim_init("cjob", 0, 4, "", &o), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("options.pipeline_blocks: 2"),
            std::string::npos)
      << falcon_shim_last_error();
  o.pipeline_blocks = 0;
  o.block_state_bytes = (uint64_t{1} << 50) + 1;
  EXPECT_EQ(falcon_shim_init("cjob", 0, 4, "", &o), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("options.block_state_bytes"),
            std::string::npos);
  // A caller built against ABI 3 gets the defaults (unknown): its struct's sizeof is 104, tail
  // padding after agreed_directives included, which covers bytes 100..104 where pipeline_blocks
  // sits now. Whatever those bytes hold (here 0xff..., out of range if read) is not read.
  constexpr uint32_t kAbi3Size = 104;
  static_assert(offsetof(falcon_shim_options, agreed_directives) + sizeof(int32_t) == 100);
  std::memset(reinterpret_cast<char*>(&o) + 100, 0xff, sizeof(o) - 100);
  EXPECT_EQ(o.pipeline_blocks, 0xffffffffu);
  o.struct_size = kAbi3Size;
  ASSERT_EQ(falcon_shim_init("cjob", 0, 4, "", &o), FALCON_SHIM_OK) << falcon_shim_last_error();
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  // One byte short of block_state_bytes' end: still an older struct.
  o.struct_size = sizeof(falcon_shim_options) - 1;
  ASSERT_EQ(falcon_shim_init("cjob", 0, 4, "", &o), FALCON_SHIM_OK) << falcon_shim_last_error();
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  // The whole ABI-4 struct: read, and refused.
  o.struct_size = sizeof(falcon_shim_options);
  EXPECT_EQ(falcon_shim_init("cjob", 0, 4, "", &o), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("options.pipeline_blocks: 4294967295"),
            std::string::npos)
      << falcon_shim_last_error();
}

TEST_F(FalconShimCTest, PauseAndValidationThroughCCallbacks) {
  int validations = 0;
  std::vector<int> pauses;
  ASSERT_EQ(falcon_shim_set_validation_executor(RunValidation, &validations), FALCON_SHIM_OK);
  ASSERT_EQ(falcon_shim_set_pause_handler(OnPause, &pauses), FALCON_SHIM_OK);
  falcon::v1::Directive pause;
  pause.set_directive_id(10);
  pause.set_job("cjob");
  pause.set_epoch(2);
  pause.set_effective_iteration(0);
  pause.mutable_pause()->set_max_duration_ns(60'000'000'000);
  ASSERT_TRUE(agent_->SendDirective(pause));
  ASSERT_TRUE(
      agent_->WaitFor([&] { return HasAck(*agent_, 10, falcon::v1::ACK_STATUS_RECEIVED); }));
  std::thread trainer([] { EXPECT_EQ(falcon_shim_poll_directives(0, nullptr, nullptr), 0); });
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 10, falcon::v1::ACK_STATUS_APPLIED); }));
  falcon::v1::AgentToShim m;
  auto* t = m.mutable_validation_task();
  t->set_task_id(3);
  t->set_job("cjob");
  t->set_epoch(2);
  t->mutable_link_pass()->set_bytes(4096);
  t->mutable_link_pass()->set_repeats(1);
  auto* l = t->mutable_link_pass()->add_links();
  l->set_src_rank(2);
  l->set_dst_rank(3);
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 1; }));
  const auto result = agent_->results()[0];
  ASSERT_EQ(result.links_size(), 1);
  EXPECT_EQ(result.links(0).duration_ns(), 1003);
  EXPECT_EQ(result.links(0).bytes(), 4096u);
  EXPECT_EQ(result.links(0).link().dst_rank(), 3u);
  falcon::v1::Directive resume = pause;
  resume.set_directive_id(11);
  resume.mutable_resume();
  ASSERT_TRUE(agent_->SendDirective(resume));
  trainer.join();
  EXPECT_EQ(validations, 1);
  EXPECT_EQ(pauses, (std::vector<int>{1, 0}));
}

TEST(FalconShimCNoInitTest, EverythingFailsCleanlyBeforeInit) {
  falcon_shim_op op{};
  EXPECT_EQ(falcon_shim_record_op(&op), FALCON_SHIM_FAILED_PRECONDITION);
  EXPECT_EQ(falcon_shim_poll_directives(0, nullptr, nullptr), FALCON_SHIM_FAILED_PRECONDITION);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_FAILED_PRECONDITION);
  EXPECT_EQ(falcon_shim_profiling_enabled(), 0);
  EXPECT_EQ(falcon_shim_init(nullptr, 0, 1, nullptr, nullptr), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_EQ(falcon_shim_init("bad job", 0, 1, nullptr, nullptr), FALCON_SHIM_INVALID_ARGUMENT);
  EXPECT_NE(std::string(falcon_shim_last_error()).find("options.job"), std::string::npos);
  // Init, shutdown and init again work.
  EXPECT_EQ(falcon_shim_init("j", 0, 1, nullptr, nullptr), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_init("j", 0, 1, nullptr, nullptr), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
}

// The shutdown hook runs first in every shutdown, while the shim still takes records.
TEST(FalconShimCNoInitTest, TheShutdownHookRunsBeforeTheShimStops) {
  struct Seen {
    int calls = 0;
    falcon_shim_status register_status = -1;
  } seen;
  auto hook = [](void* user_data) {
    auto* s = static_cast<Seen*>(user_data);
    ++s->calls;
    const uint32_t members[] = {0};
    s->register_status = falcon_shim_register_comm(7, FALCON_SHIM_COMM_WORLD, members, 1, "w");
  };
  EXPECT_EQ(falcon_shim_set_shutdown_hook(hook, &seen), FALCON_SHIM_OK);  // Before any init.
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_FAILED_PRECONDITION);
  EXPECT_EQ(seen.calls, 0) << "no shim, no hook";
  ASSERT_EQ(falcon_shim_init("j", 0, 1, nullptr, nullptr), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.register_status, FALCON_SHIM_OK) << "the shim still runs inside the hook";
  ASSERT_EQ(falcon_shim_init("j", 0, 1, nullptr, nullptr), FALCON_SHIM_OK);  // Kept across.
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  EXPECT_EQ(seen.calls, 2);
  EXPECT_EQ(falcon_shim_set_shutdown_hook(nullptr, nullptr), FALCON_SHIM_OK);
  ASSERT_EQ(falcon_shim_init("j", 0, 1, nullptr, nullptr), FALCON_SHIM_OK);
  EXPECT_EQ(falcon_shim_shutdown(), FALCON_SHIM_OK);
  EXPECT_EQ(seen.calls, 2) << "removed";
}

}  // namespace
}  // namespace falcon::trainer_shim
