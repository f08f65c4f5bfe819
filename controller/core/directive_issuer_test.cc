#include "controller/core/directive_issuer.h"

#include <memory>
#include <optional>
#include <random>
#include <set>

#include "controller/store/in_memory_kv_store.h"
#include "controller/store/keys.h"
#include "controller/testing/fake_agent_channel.h"
#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::core {
namespace {

using falcon::v1::DirectiveRecord;

class DirectiveIssuerTest : public ::testing::Test {
 protected:
  DirectiveIssuerTest()
      : kv_(store::ControllerStore::TableNames()),
        store_(&kv_, &clock_),
        ids_(falcon::controller::v1::MetaRecord{}),
        issuer_(DirectiveOptions{}, &clock_, &ids_, &hub_) {
    testing::LayoutSpec spec;  // 4 ranks on 2 nodes.
    store::StoreTxn txn;
    for (uint32_t n = 0; n < 2; ++n) {
      EXPECT_FALSE(registry_
                       .Register(testing::NodeName(n), testing::NodeName(n),
                                 testing::NodeRegistration(spec, n), "r", &txn)
                       .has_value());
      channels_[n] = std::make_shared<testing::FakeAgentChannel>();
      hub_.Attach(testing::NodeName(n), channels_[n]);
    }
  }
  const registry::JobEntry& job() { return *registry_.Find("job"); }
  falcon::v1::DirectiveAck Ack(uint64_t id, uint32_t rank, falcon::v1::AckStatus status) {
    falcon::v1::DirectiveAck a;
    a.set_directive_id(id);
    a.set_job("job");
    a.set_rank(rank);
    a.set_epoch(1);
    a.set_status(status);
    a.set_applied_iteration(status == falcon::v1::ACK_STATUS_APPLIED ? 10 : -1);
    if (status == falcon::v1::ACK_STATUS_REJECTED) a.set_reason("stale epoch");
    return a;
  }

  common::FakeClock clock_;
  store::InMemoryKvStore kv_;
  store::ControllerStore store_;
  AgentHub hub_;
  IdAllocator ids_;
  registry::JobRegistry registry_;
  DirectiveIssuer issuer_;
  std::shared_ptr<testing::FakeAgentChannel> channels_[2];
};

TEST_F(DirectiveIssuerTest, StoredBeforeSentAndAppliedWhenAllAck) {
  UnitOfWork uow;
  falcon::v1::Directive d;
  d.mutable_pause()->set_max_duration_ns(1'000'000'000);
  d.set_effective_iteration(12);
  uint64_t id = issuer_.Issue(d, 5, job(), &uow);
  EXPECT_EQ(id, 1u);
  EXPECT_TRUE(channels_[0]->sent.empty());  // Nothing leaves before the commit.
  ASSERT_TRUE(uow.Commit(&store_).ok());
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  EXPECT_EQ(channels_[1]->sent[0].directive().directive_id(), id);
  EXPECT_EQ(channels_[1]->sent[0].directive().epoch(), 1u);
  auto stored = store_.LoadDirectives();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state(), DirectiveRecord::STATE_PENDING);
  EXPECT_EQ((*stored)[0].event_id(), 5u);

  for (uint32_t r = 0; r < 3; ++r) {
    UnitOfWork u;
    auto out = issuer_.OnAck(Ack(id, r, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
    EXPECT_FALSE(out.state_changed);
  }
  UnitOfWork u;
  auto received = issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_RECEIVED), job(), &u);
  EXPECT_FALSE(received.state_changed);
  auto out = issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_APPLIED);
  EXPECT_EQ(out.record->acks_size(), 4);  // One per rank; RECEIVED replaced by APPLIED.
  EXPECT_EQ(issuer_.OnAck(Ack(99, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u).record, nullptr);
}

TEST_F(DirectiveIssuerTest, RejectTimeoutRedeliverAndList) {
  UnitOfWork uow;
  falcon::v1::Directive d;
  d.mutable_resume();
  d.add_target_ranks(2);
  uint64_t a = issuer_.Issue(d, 0, job(), &uow);
  uint64_t b = issuer_.Issue(d, 0, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  EXPECT_TRUE(channels_[0]->sent.empty());  // Rank 2 lives on node-1 only.
  EXPECT_EQ(channels_[1]->sent.size(), 2u);
  auto out = issuer_.OnAck(Ack(a, 2, falcon::v1::ACK_STATUS_REJECTED), job(), &uow);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_REJECTED);
  issuer_.Redeliver(testing::NodeName(1), job());
  EXPECT_EQ(channels_[1]->sent.size(), 3u);  // Only b is still pending.
  EXPECT_EQ(channels_[1]->sent.back().directive().directive_id(), b);
  clock_.Advance(absl::Seconds(61));
  EXPECT_EQ(issuer_.Tick(clock_.Now(), &uow), std::vector<uint64_t>{b});
  auto list = issuer_.List("job", 1);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].directive().directive_id(), b);
  EXPECT_EQ(list[0].state(), DirectiveRecord::STATE_TIMED_OUT);
  EXPECT_TRUE(issuer_.List("other", 0).empty());
}

falcon::v1::Directive PlanDirective(std::vector<uint32_t> m) {
  falcon::v1::Directive d;
  for (uint32_t v : m) d.mutable_micro_batch_plan()->add_micro_batches(v);
  d.set_plan_version(1);
  return d;
}

TEST_F(DirectiveIssuerTest, EffectiveIterationAheadOfEveryRank) {
  issuer_.set_progress_fn([](const std::string&) {
    JobProgress p;
    p.max_rank_iteration = 40;
    p.iteration_time = absl::Milliseconds(100);
    return p;
  });
  // 1 s delivery latency at 100 ms per iteration: 10 iterations + 1 ahead of rank progress.
  EXPECT_EQ(issuer_.EffectiveIteration("job"), 51);
  UnitOfWork uow;
  uint64_t s2 = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(s2)->directive().effective_iteration(), 51);
  falcon::v1::Directive later = PlanDirective({2, 2});
  later.set_effective_iteration(80);  // Later than needed: kept.
  EXPECT_EQ(issuer_.Find(issuer_.Issue(later, 1, job(), &uow))->directive().effective_iteration(),
            80);
  falcon::v1::Directive pause;  // Not a plan: the localizer chooses its own iteration.
  pause.mutable_pause()->set_max_duration_ns(1);
  pause.set_effective_iteration(12);
  EXPECT_EQ(issuer_.Find(issuer_.Issue(pause, 1, job(), &uow))->directive().effective_iteration(),
            12);
  // Slow iterations: the minimum lead applies.
  issuer_.set_progress_fn([](const std::string&) { return JobProgress{7, absl::Seconds(30)}; });
  EXPECT_EQ(issuer_.EffectiveIteration("job"), 9);
}

// S2L's layer split is a plan (its effective iteration is raised ahead of every rank) that keeps
// the epoch: every rank stays at its (dp, pp, tp) place.
TEST_F(DirectiveIssuerTest, ALayerSplitIsAPlanThatKeepsTheEpoch) {
  issuer_.set_progress_fn([](const std::string&) { return JobProgress{40, absl::Seconds(30)}; });
  UnitOfWork uow;
  falcon::v1::Directive s2l;
  s2l.set_plan_version(1);
  s2l.set_effective_iteration(3);  // Behind the ranks: raised.
  falcon::v1::LayerSplit* split = s2l.mutable_layer_split();
  for (int d = 0; d < 2; ++d) {
    falcon::v1::ReplicaSplit* r = split->add_replicas();
    r->add_stage_blocks(d == 0 ? 6 : 8);
    r->add_stage_blocks(d == 0 ? 10 : 8);
    split->add_micro_batches(d == 0 ? 3 : 5);
  }
  const uint64_t id = issuer_.Issue(s2l, 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(id)->directive().effective_iteration(), 42);
  EXPECT_EQ(issuer_.Find(id)->directive().epoch(), 1u);
  EXPECT_EQ(issuer_.Epoch(job()), 1u);
}

// Plans issued before the job applied the last one (S2 and S2L in one step, the reverts on clear)
// carry rising plan versions, also after a restart (Load), so a shim that acts only on newer plans
// skips none of them.
TEST_F(DirectiveIssuerTest, PlanVersionsRiseInIssueOrder) {
  UnitOfWork uow;
  falcon::v1::Directive s2 = PlanDirective({2, 2});
  s2.set_plan_version(1);
  falcon::v1::Directive s2l = s2;  // Planned in the same step: the same version as S2's.
  const uint64_t a = issuer_.Issue(s2, 1, job(), &uow);
  const uint64_t b = issuer_.Issue(s2l, 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(a)->directive().plan_version(), 1);
  EXPECT_EQ(issuer_.Find(b)->directive().plan_version(), 2);
  falcon::v1::Directive pause;
  pause.mutable_pause()->set_max_duration_ns(1'000'000'000);
  const uint64_t p = issuer_.Issue(pause, 1, job(), &uow);  // Not a plan: untouched.
  EXPECT_EQ(issuer_.Find(p)->directive().plan_version(), 0);
  std::vector<falcon::v1::DirectiveRecord> records = {*issuer_.Find(a), *issuer_.Find(b)};
  issuer_.Load(records);
  const uint64_t c = issuer_.Issue(s2, 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(c)->directive().plan_version(), 3);
}

TEST_F(DirectiveIssuerTest, RetriesKeepTheIdBackOffAndTimeOut) {
  auto jobs = [this](const std::string& name) { return registry_.Find(name); };
  UnitOfWork uow;
  uint64_t id = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  ASSERT_EQ(channels_[1]->sent.size(), 1u);
  // Before retry_initial: nothing re-sent.
  clock_.Advance(absl::Seconds(4));
  UnitOfWork u1;
  EXPECT_TRUE(issuer_.Tick(clock_.Now(), &u1, jobs).empty());
  ASSERT_TRUE(u1.Commit(&store_).ok());
  EXPECT_EQ(channels_[0]->sent.size(), 1u);
  // After 5 s: re-delivered to both nodes with the same id.
  clock_.Advance(absl::Seconds(1));
  UnitOfWork u2;
  issuer_.Tick(clock_.Now(), &u2, jobs);
  ASSERT_TRUE(u2.Commit(&store_).ok());
  ASSERT_EQ(channels_[0]->sent.size(), 2u);
  ASSERT_EQ(channels_[1]->sent.size(), 2u);
  EXPECT_EQ(channels_[1]->sent[1].directive().directive_id(), id);
  EXPECT_EQ(issuer_.Find(id)->deliveries(), 2u);
  // Node 0's ranks (0, 1) applied it: the next retry goes to node 1 only, after 10 s (backoff).
  UnitOfWork u3;
  issuer_.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u3);
  issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u3);
  issuer_.OnAck(Ack(id, 2, falcon::v1::ACK_STATUS_RECEIVED), job(), &u3);
  clock_.Advance(absl::Seconds(9));
  issuer_.Tick(clock_.Now(), &u3, jobs);
  ASSERT_TRUE(u3.Commit(&store_).ok());
  EXPECT_EQ(channels_[1]->sent.size(), 2u);
  clock_.Advance(absl::Seconds(1));
  UnitOfWork u4;
  issuer_.Tick(clock_.Now(), &u4, jobs);
  ASSERT_TRUE(u4.Commit(&store_).ok());
  EXPECT_EQ(channels_[0]->sent.size(), 2u);
  EXPECT_EQ(channels_[1]->sent.size(), 3u);
  // The budget: TIMED_OUT, with the reason persisted.
  clock_.Advance(absl::Seconds(60));
  UnitOfWork u5;
  EXPECT_EQ(issuer_.Tick(clock_.Now(), &u5, jobs), std::vector<uint64_t>{id});
  ASSERT_TRUE(u5.Commit(&store_).ok());
  auto stored = store_.LoadDirectives();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state(), DirectiveRecord::STATE_TIMED_OUT);
  EXPECT_EQ((*stored)[0].deliveries(), 3u);
  EXPECT_NE((*stored)[0].state_reason().find("3 deliveries"), std::string::npos)
      << (*stored)[0].state_reason();
  EXPECT_EQ((*stored)[0].acks_size(), 3);  // Every ack is persisted.
}

TEST_F(DirectiveIssuerTest, AHeldJobsDirectiveDoesNotTimeOutAndGetsItsBudgetBack) {
  auto jobs = [this](const std::string& name) { return registry_.Find(name); };
  bool held = false;
  auto is_held = [&held](const std::string&) { return held; };
  UnitOfWork uow;
  const uint64_t id = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  clock_.Advance(absl::Seconds(30));
  held = true;  // An agent of the job restarts.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(absl::Seconds(10));
    UnitOfWork u;
    EXPECT_TRUE(issuer_.Tick(clock_.Now(), &u, jobs, is_held).empty()) << "held at " << i;
    ASSERT_TRUE(u.Commit(&store_).ok());
  }
  held = false;  // Back 110 s after the issue: the whole 60 s budget is left from the last hold.
  clock_.Advance(absl::Seconds(59));
  UnitOfWork u1;
  EXPECT_TRUE(issuer_.Tick(clock_.Now(), &u1, jobs, is_held).empty());
  EXPECT_EQ(issuer_.Find(id)->state(), DirectiveRecord::STATE_PENDING);
  clock_.Advance(absl::Seconds(1));
  UnitOfWork u2;
  EXPECT_EQ(issuer_.Tick(clock_.Now(), &u2, jobs, is_held), std::vector<uint64_t>{id});
}

TEST_F(DirectiveIssuerTest, TopologyChangeBumpsTheEpochAndFencesOlderAcks) {
  UnitOfWork uow;
  uint64_t s2 = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(s2)->directive().epoch(), 1u);
  falcon::v1::Directive s3;
  s3.set_plan_version(2);
  s3.mutable_topology_change()->add_assignments()->set_rank(0);
  uint64_t topo = issuer_.Issue(s3, 1, job(), &uow);
  EXPECT_EQ(issuer_.Find(topo)->directive().epoch(), 2u);
  EXPECT_EQ(issuer_.Epoch(job()), 2u);
  falcon::v1::Directive resume;
  resume.mutable_resume();
  EXPECT_EQ(issuer_.Find(issuer_.Issue(resume, 1, job(), &uow))->directive().epoch(), 2u);
  // An ack of the S2 (epoch 1) now: refused, naming both epochs; the S2 is superseded.
  falcon::v1::DirectiveAck old = Ack(s2, 0, falcon::v1::ACK_STATUS_APPLIED);
  old.set_epoch(1);
  auto out = issuer_.OnAck(old, job(), &uow);
  EXPECT_NE(out.error.find("epoch 1 is older than job 'job' epoch 2"), std::string::npos)
      << out.error;
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(issuer_.Find(s2)->state(), DirectiveRecord::STATE_REJECTED);
  EXPECT_EQ(issuer_.Find(s2)->rollback_directive_id(), 0u);
  // An ack that misstates its directive's epoch is refused without a change.
  falcon::v1::DirectiveAck wrong = Ack(topo, 0, falcon::v1::ACK_STATUS_APPLIED);
  wrong.set_epoch(7);
  out = issuer_.OnAck(wrong, job(), &uow);
  EXPECT_FALSE(out.state_changed);
  EXPECT_FALSE(out.error.empty());
  EXPECT_EQ(issuer_.Find(topo)->acks_size(), 0);
  // After a restart the fence comes back from the stored directives.
  ASSERT_TRUE(uow.Commit(&store_).ok());
  DirectiveIssuer again(DirectiveOptions{}, &clock_, &ids_, &hub_);
  again.Load(*store_.LoadDirectives());
  EXPECT_EQ(again.Epoch(job()), 2u);
}

TEST_F(DirectiveIssuerTest, RejectRollsBackTheRanksThatApplied) {
  UnitOfWork uow;
  falcon::v1::Directive undo = PlanDirective({2, 2});
  undo.set_plan_version(3);
  uint64_t id = issuer_.Issue(PlanDirective({0, 4}), 9, job(), &uow, &undo);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  channels_[0]->sent.clear();
  channels_[1]->sent.clear();
  UnitOfWork u;
  falcon::v1::DirectiveAck a0 = Ack(id, 0, falcon::v1::ACK_STATUS_APPLIED);
  falcon::v1::DirectiveAck a1 = Ack(id, 1, falcon::v1::ACK_STATUS_APPLIED);
  falcon::v1::DirectiveAck r2 = Ack(id, 2, falcon::v1::ACK_STATUS_REJECTED);
  for (auto* a : {&a0, &a1, &r2}) a->set_epoch(1);
  issuer_.OnAck(a0, job(), &u);
  issuer_.OnAck(a1, job(), &u);
  auto out = issuer_.OnAck(r2, job(), &u);
  EXPECT_TRUE(out.state_changed);
  ASSERT_NE(out.rollback_id, 0u);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_REJECTED);
  EXPECT_EQ(out.record->rollback_directive_id(), out.rollback_id);
  EXPECT_NE(out.record->state_reason().find("rank 2"), std::string::npos);
  const DirectiveRecord* rb = issuer_.Find(out.rollback_id);
  ASSERT_NE(rb, nullptr);
  EXPECT_EQ(rb->directive().reverts_directive_id(), id);
  EXPECT_EQ(rb->event_id(), 9u);
  EXPECT_EQ(std::vector<uint32_t>(rb->directive().target_ranks().begin(),
                                  rb->directive().target_ranks().end()),
            (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(rb->directive().micro_batch_plan().micro_batches(1), 2u);
  EXPECT_TRUE(channels_[0]->sent.empty());  // Sent after the commit, to node 0 only.
  ASSERT_TRUE(u.Commit(&store_).ok());
  ASSERT_EQ(channels_[0]->sent.size(), 1u);
  EXPECT_TRUE(channels_[1]->sent.empty());
  EXPECT_EQ(channels_[0]->sent[0].directive().directive_id(), out.rollback_id);
}

TEST_F(DirectiveIssuerTest, RestartRedeliversPendingWithTheSameId) {
  UnitOfWork uow;
  uint64_t id = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  // The controller restarts: a fresh issuer (and id allocator) from the store.
  AgentHub hub;
  auto ch = std::make_shared<testing::FakeAgentChannel>();
  hub.Attach(testing::NodeName(1), ch);
  IdAllocator ids(*store_.LoadMeta());
  DirectiveIssuer again(DirectiveOptions{}, &clock_, &ids, &hub);
  again.Load(*store_.LoadDirectives());
  UnitOfWork u;
  again.Tick(clock_.Now(), &u, [this](const std::string& n) { return registry_.Find(n); });
  ASSERT_TRUE(u.Commit(&store_).ok());
  ASSERT_EQ(ch->sent.size(), 1u);
  EXPECT_EQ(ch->sent[0].directive().directive_id(), id);
  EXPECT_EQ(again.Find(id)->deliveries(), 2u);
  // New directives never reuse the id.
  UnitOfWork u2;
  EXPECT_GT(again.Issue(PlanDirective({2, 2}), 1, job(), &u2), id);
}

falcon::v1::Directive Pause(std::vector<uint32_t> targets) {
  falcon::v1::Directive d;
  d.mutable_pause()->set_max_duration_ns(1'000'000'000);
  for (uint32_t r : targets) d.add_target_ranks(r);
  return d;
}

TEST_F(DirectiveIssuerTest, AnAckReplacesTheRanksAckButALateReceivedNeverAFinalOne) {
  UnitOfWork uow;
  const uint64_t id = issuer_.Issue(Pause({1, 2, 2}), 1, job(), &uow);  // Rank 2 named twice.
  ASSERT_TRUE(uow.Commit(&store_).ok());
  UnitOfWork u;
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_RECEIVED), job(), &u).state_changed);
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  // A re-delivery's RECEIVED arriving late keeps rank 1 applied.
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_RECEIVED), job(), &u).state_changed);
  // Rank 0 is no target: its ack is kept but does not complete the directive.
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 2, falcon::v1::ACK_STATUS_RECEIVED), job(), &u).state_changed);
  auto out = issuer_.OnAck(Ack(id, 2, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_APPLIED);
  ASSERT_EQ(out.record->acks_size(), 3);  // One per rank, in the order they first answered.
  EXPECT_EQ(out.record->acks(0).rank(), 1u);
  EXPECT_EQ(out.record->acks(0).status(), falcon::v1::ACK_STATUS_APPLIED);
  EXPECT_EQ(out.record->acks(1).rank(), 0u);
  EXPECT_EQ(out.record->acks(2).rank(), 2u);
  EXPECT_EQ(out.record->acks(2).status(), falcon::v1::ACK_STATUS_APPLIED);
  ASSERT_TRUE(u.Commit(&store_).ok());
  auto stored = store_.LoadDirectives();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].state(), DirectiveRecord::STATE_APPLIED);
  EXPECT_EQ((*stored)[0].acks_size(), 3);
}

TEST_F(DirectiveIssuerTest, ARankThatAppliedThenRejectsIsNotRolledBack) {
  UnitOfWork uow;
  falcon::v1::Directive undo = PlanDirective({2, 2});
  const uint64_t id = issuer_.Issue(PlanDirective({0, 4}), 3, job(), &uow, &undo);
  UnitOfWork u;
  issuer_.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  issuer_.OnAck(Ack(id, 2, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  // Rank 1's final answer is replaced by a later final one.
  auto out = issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_REJECTED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_REJECTED);
  EXPECT_EQ(out.record->state_reason(), "rank 1 rejected it: stale epoch");
  EXPECT_EQ(out.record->acks_size(), 3);
  const DirectiveRecord* rb = issuer_.Find(out.rollback_id);
  ASSERT_NE(rb, nullptr);
  EXPECT_EQ(std::vector<uint32_t>(rb->directive().target_ranks().begin(),
                                  rb->directive().target_ranks().end()),
            (std::vector<uint32_t>{0, 2}));
  // Acks after the directive is final are kept and change nothing.
  out = issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_FALSE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_REJECTED);
  EXPECT_EQ(out.record->acks_size(), 4);
}

TEST_F(DirectiveIssuerTest, AJobWideDirectiveWaitsForEveryRankOfTheJob) {
  UnitOfWork uow;
  const uint64_t id = issuer_.Issue(Pause({}), 1, job(), &uow);
  UnitOfWork u;
  for (uint32_t r : {0u, 1u, 2u}) {
    EXPECT_FALSE(
        issuer_.OnAck(Ack(id, r, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  }
  // As many applied ranks as the job has, but rank 7 is none of its ranks and 3 is missing.
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 7, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  EXPECT_FALSE(issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_RECEIVED), job(), &u).state_changed);
  auto out = issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_APPLIED);
}

TEST_F(DirectiveIssuerTest, APendingDirectivesAcksCountAfterARestart) {
  UnitOfWork uow;
  const uint64_t id = issuer_.Issue(Pause({0, 1, 2}), 1, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  UnitOfWork u;
  issuer_.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  issuer_.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_RECEIVED), job(), &u);
  ASSERT_TRUE(u.Commit(&store_).ok());
  DirectiveIssuer again(DirectiveOptions{}, &clock_, &ids_, &hub_);
  again.Load(*store_.LoadDirectives());
  UnitOfWork u2;
  // Rank 0 stays applied (a late RECEIVED), rank 1's RECEIVED is replaced.
  EXPECT_FALSE(again.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_RECEIVED), job(), &u2).state_changed);
  EXPECT_FALSE(again.OnAck(Ack(id, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u2).state_changed);
  auto out = again.OnAck(Ack(id, 2, falcon::v1::ACK_STATUS_APPLIED), job(), &u2);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_APPLIED);
  EXPECT_EQ(out.record->acks_size(), 3);
}

// An ack costs O(1) in the store: its own row; the record's row (without its acks) only when the
// state changes.
TEST_F(DirectiveIssuerTest, AnAckStagesItsOwnRowAndTheRecordsRowOnlyWhenTheStateChanges) {
  UnitOfWork uow;
  const uint64_t id = issuer_.Issue(Pause({}), 1, job(), &uow);
  ASSERT_TRUE(uow.Commit(&store_).ok());
  const std::string row =
      *kv_.Get(store::tables::kDirectives, store::keys::DirectiveKey("job", id));
  for (uint32_t r = 0; r < 4; ++r) {
    UnitOfWork u;
    EXPECT_FALSE(
        issuer_.OnAck(Ack(id, r, falcon::v1::ACK_STATUS_RECEIVED), job(), &u).state_changed);
    EXPECT_EQ(u.txn().size(), 1u);
    ASSERT_TRUE(u.Commit(&store_).ok());
  }
  for (uint32_t r = 0; r < 3; ++r) {
    UnitOfWork u;
    issuer_.OnAck(Ack(id, r, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
    EXPECT_EQ(u.txn().size(), 1u);
    ASSERT_TRUE(u.Commit(&store_).ok());
  }
  {
    UnitOfWork u;  // A late RECEIVED changes nothing: nothing is stored.
    issuer_.OnAck(Ack(id, 0, falcon::v1::ACK_STATUS_RECEIVED), job(), &u);
    EXPECT_TRUE(u.txn().empty());
  }
  EXPECT_EQ(*kv_.Get(store::tables::kDirectives, store::keys::DirectiveKey("job", id)), row);
  UnitOfWork u;
  EXPECT_TRUE(issuer_.OnAck(Ack(id, 3, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  EXPECT_EQ(u.txn().size(), 2u);
  ASSERT_TRUE(u.Commit(&store_).ok());
  DirectiveRecord head;
  ASSERT_TRUE(head.ParseFromString(
      *kv_.Get(store::tables::kDirectives, store::keys::DirectiveKey("job", id))));
  EXPECT_EQ(head.state(), DirectiveRecord::STATE_APPLIED);
  EXPECT_EQ(head.acks_size(), 0);
  auto stored = store_.LoadDirectives();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->at(0).SerializeAsString(), issuer_.Find(id)->SerializeAsString());
}

TEST_F(DirectiveIssuerTest, ALoadedRecordWithTwoAcksOfARankHasBothReplaced) {
  // Such a record is not written while PENDING (a refused ack is kept beside an earlier one only
  // as the directive becomes REJECTED); a stored one is still handled as before.
  DirectiveRecord r;
  *r.mutable_directive() = Pause({0, 1});
  r.mutable_directive()->set_directive_id(4);
  r.mutable_directive()->set_job("job");
  r.mutable_directive()->set_epoch(1);
  r.set_state(DirectiveRecord::STATE_PENDING);
  r.set_issued_time_ns(absl::ToUnixNanos(clock_.Now()));
  *r.add_acks() = Ack(4, 0, falcon::v1::ACK_STATUS_RECEIVED);
  *r.add_acks() = Ack(4, 0, falcon::v1::ACK_STATUS_RECEIVED);
  issuer_.Load({r});
  UnitOfWork u;
  EXPECT_FALSE(issuer_.OnAck(Ack(4, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u).state_changed);
  auto out = issuer_.OnAck(Ack(4, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_APPLIED);
  ASSERT_EQ(out.record->acks_size(), 3);
  EXPECT_EQ(out.record->acks(1).status(), falcon::v1::ACK_STATUS_APPLIED);
}

TEST_F(DirectiveIssuerTest, ARefusedAckOfASupersededDirectiveIsKeptAndLaterAcksChangeNothing) {
  UnitOfWork uow;
  const uint64_t s2 = issuer_.Issue(PlanDirective({2, 2}), 1, job(), &uow);
  UnitOfWork u;
  issuer_.OnAck(Ack(s2, 0, falcon::v1::ACK_STATUS_RECEIVED), job(), &u);
  falcon::v1::Directive s3;
  s3.mutable_topology_change()->add_assignments()->set_rank(0);
  issuer_.Issue(s3, 1, job(), &u);
  auto out = issuer_.OnAck(Ack(s2, 0, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_TRUE(out.state_changed);
  EXPECT_EQ(issuer_.Find(s2)->state(), DirectiveRecord::STATE_REJECTED);
  EXPECT_EQ(issuer_.Find(s2)->acks_size(), 2);  // The refused ack is kept beside the first.
  out = issuer_.OnAck(Ack(s2, 1, falcon::v1::ACK_STATUS_APPLIED), job(), &u);
  EXPECT_FALSE(out.state_changed);
  EXPECT_FALSE(out.error.empty());
  EXPECT_EQ(issuer_.Find(s2)->acks_size(), 2);
  // Stored as held: both acks of rank 0 (one row each), then replaced both after a restart.
  ASSERT_TRUE(uow.Commit(&store_).ok());
  ASSERT_TRUE(u.Commit(&store_).ok());
  auto stored = store_.LoadDirectives();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->at(0).directive().directive_id(), s2);
  EXPECT_EQ(stored->at(0).SerializeAsString(), issuer_.Find(s2)->SerializeAsString());
}

// The state after any sequence of acks is what the acks say: the rank's latest ack (a RECEIVED
// never replacing a final one), REJECTED by the first rejecting ack in the record, APPLIED once
// every target applied it.
TEST_F(DirectiveIssuerTest, RandomAckSequencesGiveTheStateTheAcksSay) {
  std::mt19937 rng(7);
  const falcon::v1::AckStatus kStatuses[] = {falcon::v1::ACK_STATUS_RECEIVED,
                                             falcon::v1::ACK_STATUS_APPLIED,
                                             falcon::v1::ACK_STATUS_REJECTED};
  for (int round = 0; round < 300; ++round) {
    std::vector<uint32_t> targets;
    for (uint32_t r = 0; r < 5; ++r) {
      if (rng() % 2) targets.push_back(r);
    }
    UnitOfWork uow;
    const uint64_t id = issuer_.Issue(Pause(targets), 1, job(), &uow);
    ASSERT_TRUE(uow.Commit(&store_).ok());
    std::vector<falcon::v1::DirectiveAck> model;
    const std::vector<uint32_t> must = targets.empty() ? job().ranks() : targets;
    while (issuer_.Find(id)->state() == DirectiveRecord::STATE_PENDING) {
      // Rejections rare, so that many sequences end APPLIED.
      const falcon::v1::AckStatus st = kStatuses[rng() % 20 == 0 ? 2 : rng() % 2];
      const falcon::v1::DirectiveAck ack = Ack(id, rng() % 6, st);
      bool found = false;
      for (auto& a : model) {
        if (a.rank() != ack.rank()) continue;
        found = true;
        if (a.status() == falcon::v1::ACK_STATUS_RECEIVED ||
            ack.status() != falcon::v1::ACK_STATUS_RECEIVED) {
          a = ack;
        }
      }
      if (!found) model.push_back(ack);
      std::set<uint32_t> applied;
      const falcon::v1::DirectiveAck* rejected = nullptr;
      for (const auto& a : model) {
        if (a.status() == falcon::v1::ACK_STATUS_APPLIED) applied.insert(a.rank());
        if (a.status() == falcon::v1::ACK_STATUS_REJECTED && rejected == nullptr) rejected = &a;
      }
      bool all = true;
      for (uint32_t r : must) all = all && applied.count(r) > 0;
      UnitOfWork u;
      auto out = issuer_.OnAck(ack, job(), &u);
      ASSERT_TRUE(u.Commit(&store_).ok());
      ASSERT_NE(out.record, nullptr);
      ASSERT_EQ(out.record->acks_size(), static_cast<int>(model.size()));
      for (size_t i = 0; i < model.size(); ++i) {
        EXPECT_EQ(out.record->acks(i).rank(), model[i].rank());
        EXPECT_EQ(out.record->acks(i).status(), model[i].status());
      }
      if (rejected != nullptr) {
        EXPECT_EQ(out.record->state(), DirectiveRecord::STATE_REJECTED) << "round " << round;
        EXPECT_EQ(out.record->state_reason(),
                  absl::StrCat("rank ", rejected->rank(), " rejected it: stale epoch"));
      } else {
        EXPECT_EQ(out.record->state(),
                  all ? DirectiveRecord::STATE_APPLIED : DirectiveRecord::STATE_PENDING)
            << "round " << round;
      }
      EXPECT_EQ(out.state_changed, rejected != nullptr || all);
    }
    // The store holds what the issuer holds: the record's row and its ack rows.
    bool found = false;
    auto stored = store_.LoadDirectives();
    ASSERT_TRUE(stored.ok()) << stored.status();
    for (const DirectiveRecord& r : *stored) {
      if (r.directive().directive_id() != id) continue;
      found = true;
      EXPECT_EQ(r.SerializeAsString(), issuer_.Find(id)->SerializeAsString()) << "round " << round;
    }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace falcon::controller::core
