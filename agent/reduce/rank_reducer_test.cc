#include "agent/reduce/rank_reducer.h"

#include <vector>

#include "gtest/gtest.h"

namespace falcon::agent::reduce {
namespace {

constexpr int64_t kMs = 1000 * 1000;

HeldOp Op(uint64_t comm, int64_t start, int64_t end, int64_t iteration = -1,
          v1::OpKind kind = v1::OP_KIND_ALL_REDUCE) {
  HeldOp op;
  op.comm_id = comm;
  op.start_ns = start;
  op.end_ns = end;
  op.iteration = iteration;
  op.kind = kind;
  op.key.comm_id = comm;
  return op;
}

v1::IterationHint Hint(int64_t iteration, int64_t start, int64_t end, int64_t plan = 0) {
  v1::IterationHint h;
  h.set_iteration(iteration);
  h.set_start_ns(start);
  h.set_end_ns(end);
  h.set_plan_version(plan);
  return h;
}

TEST(RankReducerTest, HintedIterationCompletesWhenNextIterationsOpArrives) {
  RankReducer r(0, {});
  r.AddOp(Op(1, 1 * kMs, 2 * kMs, 0));
  r.AddOp(Op(2, 5 * kMs, 6 * kMs, 0));
  r.AddHint(Hint(0, 0, 10 * kMs, 3), 0);
  std::vector<IterationDraft> out;
  r.TakeCompleted(0, false, &out);
  EXPECT_TRUE(out.empty());  // No op of iteration 1 yet: late ops of 0 may still come.
  r.AddOp(Op(1, 11 * kMs, 12 * kMs, 1));
  r.TakeCompleted(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].iteration, 0);
  EXPECT_TRUE(out[0].from_hint);
  EXPECT_EQ(out[0].plan_version, 3);
  EXPECT_EQ(out[0].end_ns - out[0].start_ns, 10 * kMs);
  EXPECT_EQ(out[0].ops.size(), 2u);
  EXPECT_EQ(r.held_ops(), 1u);
}

TEST(RankReducerTest, HintedIterationCompletesAfterHoldOrOnDrain) {
  RankReducer::Options options;
  options.hint_hold = absl::Seconds(5);
  RankReducer r(0, options);
  r.AddOp(Op(1, 1 * kMs, 2 * kMs, 0));
  r.AddHint(Hint(0, 0, 10 * kMs), /*now_ns=*/100);
  std::vector<IterationDraft> out;
  r.TakeCompleted(100 + 4 * 1000 * kMs, false, &out);
  EXPECT_TRUE(out.empty());
  r.TakeCompleted(100 + 5 * 1000 * kMs, false, &out);
  EXPECT_EQ(out.size(), 1u);

  RankReducer drained(0, options);
  drained.AddHint(Hint(0, 0, 10 * kMs), 0);
  out.clear();
  drained.TakeCompleted(0, /*flush_all=*/true, &out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(RankReducerTest, UnstampedOpsGoByTimeAndEarlierOnesAreUnassigned) {
  RankReducer r(0, {});
  r.AddOp(Op(1, 1 * kMs, 2 * kMs));    // Before the first hinted iteration.
  r.AddOp(Op(1, 21 * kMs, 22 * kMs));  // In iteration 0 = [20, 30) ms.
  r.AddOp(Op(1, 31 * kMs, 32 * kMs));  // In iteration 1.
  r.AddHint(Hint(0, 20 * kMs, 30 * kMs), 0);
  std::vector<IterationDraft> out;
  r.TakeCompleted(0, false, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].ops.size(), 1u);
  EXPECT_EQ(out[0].ops[0].start_ns, 21 * kMs);
  EXPECT_EQ(r.stats().unassigned_ops, 1u);
  EXPECT_EQ(r.held_ops(), 1u);
}

TEST(RankReducerTest, PeriodModeSplitsAtAcfAnchorsAndNumbersFromZero) {
  RankReducer::Options options;
  options.tracker.redetect_every = 128;
  RankReducer r(4, options);
  r.set_plan_version(2);
  // Iteration: AR on comm 1, SEND/RECV on comm 2, AR on comm 3; 12 ms apart.
  for (int i = 0; i < 120; ++i) {
    const int64_t t = i * 12 * kMs;
    r.AddOp(Op(1, t + 1 * kMs, t + 2 * kMs));
    r.AddOp(Op(2, t + 3 * kMs, t + 4 * kMs, -1, v1::OP_KIND_SEND));
    r.AddOp(Op(2, t + 5 * kMs, t + 6 * kMs, -1, v1::OP_KIND_RECV));
    r.AddOp(Op(3, t + 7 * kMs, t + 9 * kMs));
  }
  std::vector<IterationDraft> out;
  r.TakeCompleted(0, false, &out);
  ASSERT_GE(out.size(), 80u);
  EXPECT_EQ(r.tracker().period(), 4);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].iteration, static_cast<int64_t>(i));
    EXPECT_FALSE(out[i].from_hint);
    EXPECT_EQ(out[i].plan_version, 2);
    EXPECT_EQ(out[i].end_ns - out[i].start_ns, 12 * kMs);
    EXPECT_EQ(out[i].ops.size(), 4u);
  }
  // Memory stays bounded by about one iteration of ops.
  EXPECT_LE(r.held_ops(), 8u);
}

TEST(RankReducerTest, HeldOpsAreBounded) {
  RankReducer::Options options;
  options.max_held_ops = 10;
  RankReducer r(0, options);
  r.AddHint(Hint(0, 0, 1000 * kMs), 0);
  for (int i = 0; i < 25; ++i) r.AddOp(Op(1, i * kMs, i * kMs + 1, 0));
  EXPECT_EQ(r.held_ops(), 10u);
  EXPECT_EQ(r.stats().overflow_ops, 15u);
}

}  // namespace
}  // namespace falcon::agent::reduce
