#include "trainer/directives/directive_sync.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

falcon::v1::Directive Plan(uint64_t id, std::vector<uint32_t> m) {
  falcon::v1::Directive d;
  d.set_directive_id(id);
  d.set_effective_iteration(3);
  for (uint32_t x : m) d.mutable_micro_batch_plan()->add_micro_batches(x);
  return d;
}

falcon::v1::ValidationTask Task(uint64_t id) {
  falcon::v1::ValidationTask t;
  t.set_task_id(id);
  t.add_ranks(0);
  t.mutable_gemm()->set_m(8);
  return t;
}

TEST(DirectiveSyncTest, PayloadRoundTrips) {
  BoundaryMessage m;
  m.directives = {Plan(3, {2, 2}), Plan(1, {4, 0})};
  m.tasks = {Task(9)};
  BoundaryMessage back;
  ASSERT_TRUE(DecodePayload(EncodePayload(m), &back).ok());
  ASSERT_EQ(back.directives.size(), 2u);
  EXPECT_EQ(back.directives[0].SerializeAsString(), m.directives[0].SerializeAsString());
  EXPECT_EQ(back.directives[1].directive_id(), 1u);
  ASSERT_EQ(back.tasks.size(), 1u);
  EXPECT_EQ(back.tasks[0].task_id(), 9u);
  EXPECT_EQ(EncodePayload(BoundaryMessage{}), "");
}

TEST(DirectiveSyncTest, TruncatedOrCorruptPayloadIsDataLoss) {
  BoundaryMessage m;
  m.directives = {Plan(3, {2, 2})};
  const std::string payload = EncodePayload(m);
  BoundaryMessage back;
  EXPECT_EQ(DecodePayload(payload.substr(0, payload.size() - 1), &back).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodePayload(payload.substr(0, 3), &back).code(), absl::StatusCode::kDataLoss);
  std::string bad_tag = payload;
  bad_tag[0] = 'X';
  EXPECT_EQ(DecodePayload(bad_tag, &back).code(), absl::StatusCode::kDataLoss);
}

TEST(DirectiveSyncTest, MergeIsTheUnionByIdAndSumsLossInRankOrder) {
  std::vector<BoundaryMessage> ranks(3);
  ranks[0].directives = {Plan(5, {1})};
  ranks[0].loss_sum = 1.5;
  ranks[1].directives = {Plan(2, {9}), Plan(5, {7})};  // Id 5 again: rank 0's copy wins.
  ranks[1].tasks = {Task(4)};
  ranks[1].loss_sum = 0.25;
  ranks[2].tasks = {Task(4), Task(1)};
  ranks[2].pause_expired = true;
  const AgreedBoundary a = MergeBoundary(ranks);
  ASSERT_EQ(a.directives.size(), 2u);
  EXPECT_EQ(a.directives[0].directive_id(), 2u);
  EXPECT_EQ(a.directives[1].directive_id(), 5u);
  EXPECT_EQ(a.directives[1].micro_batch_plan().micro_batches(0), 1u);
  ASSERT_EQ(a.tasks.size(), 2u);
  EXPECT_EQ(a.tasks[0].task_id(), 1u);
  EXPECT_EQ(a.loss_sum, 1.75);
  EXPECT_TRUE(a.pause_expired);
  EXPECT_FALSE(MergeBoundary({BoundaryMessage{}}).pause_expired);
}

}  // namespace
}  // namespace falcon::trainer::directives
