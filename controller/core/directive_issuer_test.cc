#include "controller/core/directive_issuer.h"

#include <memory>
#include <optional>

#include "controller/store/in_memory_kv_store.h"
#include "controller/testing/fake_agent_channel.h"
#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller {
namespace {

using falcon::v1::DirectiveRecord;

class DirectiveIssuerTest : public ::testing::Test {
 protected:
  DirectiveIssuerTest()
      : kv_(ControllerStore::TableNames()),
        store_(&kv_, &clock_),
        ids_(falcon::controller::v1::MetaRecord{}),
        issuer_(DirectiveOptions{}, &clock_, &ids_, &hub_) {
    testing::LayoutSpec spec;  // 4 ranks on 2 nodes.
    StoreTxn txn;
    for (uint32_t n = 0; n < 2; ++n) {
      std::optional<JobEntry> e;
      registry_.Merge(testing::NodeName(n), testing::NodeName(n),
                      testing::NodeRegistration(spec, n), "r", &e);
      registry_.Install(std::move(*e), &txn);
      channels_[n] = std::make_shared<testing::FakeAgentChannel>();
      hub_.Attach(testing::NodeName(n), channels_[n]);
    }
  }
  const JobEntry& job() { return *registry_.Find("job"); }
  falcon::v1::DirectiveAck Ack(uint64_t id, uint32_t rank, falcon::v1::AckStatus status) {
    falcon::v1::DirectiveAck a;
    a.set_directive_id(id);
    a.set_job("job");
    a.set_rank(rank);
    a.set_status(status);
    a.set_applied_iteration(status == falcon::v1::ACK_STATUS_APPLIED ? 10 : -1);
    if (status == falcon::v1::ACK_STATUS_REJECTED) a.set_reason("stale epoch");
    return a;
  }

  FakeClock clock_;
  InMemoryKvStore kv_;
  ControllerStore store_;
  AgentHub hub_;
  IdAllocator ids_;
  JobRegistry registry_;
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

}  // namespace
}  // namespace falcon::controller
