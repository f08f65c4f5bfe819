#include "analysis/plan/micro_batch_solver.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The objective the solver promises, as a comparable key: (makespan, spread, Σ finish²), in
// nanoseconds over active groups.
using Key = std::tuple<int64_t, int64_t, int64_t>;

Key KeyOf(const std::vector<int64_t>& m, const std::vector<int64_t>& t_ns,
          const std::vector<bool>& excluded) {
  std::vector<int64_t> finish;
  for (size_t i = 0; i < m.size(); ++i) {
    if (!excluded.empty() && excluded[i]) continue;
    finish.push_back(m[i] * t_ns[i]);
  }
  std::sort(finish.rbegin(), finish.rend());
  int64_t squares = 0;
  for (int64_t f : finish) squares += f * f;
  return {finish.front(), finish.front() - finish.back(), squares};
}

// Exhaustive search over every plan with m_i a positive multiple of q, Σ m_i = M.
Key BruteForce(const std::vector<int64_t>& t_ns, int64_t m_total, int64_t q,
               const std::vector<bool>& excluded) {
  const size_t d = t_ns.size();
  std::vector<int64_t> m(d, 0);
  Key best{std::numeric_limits<int64_t>::max(), 0, 0};
  std::function<void(size_t, int64_t)> rec = [&](size_t i, int64_t left) {
    if (i == d) {
      if (left == 0) best = std::min(best, KeyOf(m, t_ns, excluded));
      return;
    }
    if (!excluded.empty() && excluded[i]) {
      m[i] = 0;
      rec(i + 1, left);
      return;
    }
    for (int64_t v = q; v <= left; v += q) {
      m[i] = v;
      rec(i + 1, left - v);
    }
  };
  rec(0, m_total);
  return best;
}

std::vector<absl::Duration> Ns(const std::vector<int64_t>& t_ns) {
  std::vector<absl::Duration> out;
  for (int64_t t : t_ns) out.push_back(absl::Nanoseconds(t));
  return out;
}

TEST(MicroBatchSolverTest, MatchesBruteForceOnSmallCases) {
  std::mt19937_64 rng(42);
  int checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int d = 1 + static_cast<int>(rng() % 5);
    const int64_t q = 1 + static_cast<int64_t>(rng() % 3);
    // Small time values make ties (the hard part) frequent; large ones test general ratios.
    const bool small = iter % 2 == 0;
    std::vector<int64_t> t(d);
    for (auto& x : t) x = small ? 1 + static_cast<int64_t>(rng() % 6) : 1 + rng() % 1'000'000;
    std::vector<bool> excluded;
    if (iter % 7 == 0 && d > 1) {
      excluded.assign(d, false);
      excluded[rng() % d] = true;
    }
    const int active = d - static_cast<int>(std::count(excluded.begin(), excluded.end(), true));
    const int64_t n_blocks = active + static_cast<int64_t>(rng() % (13 - active));
    MicroBatchProblem p;
    p.micro_batch_times = Ns(t);
    p.global_micro_batches = n_blocks * q;
    p.multiple = q;
    p.excluded = excluded;
    absl::StatusOr<MicroBatchSplit> got = SolveMicroBatches(p);
    ASSERT_TRUE(got.ok()) << got.status();
    int64_t sum = 0;
    for (size_t i = 0; i < got->micro_batches.size(); ++i) {
      const int64_t m = got->micro_batches[i];
      sum += m;
      if (!excluded.empty() && excluded[i]) {
        EXPECT_EQ(m, 0);
      } else {
        EXPECT_GE(m, q);
        EXPECT_EQ(m % q, 0);
      }
    }
    EXPECT_EQ(sum, p.global_micro_batches);
    const Key mine = KeyOf(got->micro_batches, t, excluded);
    const Key best = BruteForce(t, p.global_micro_batches, q, excluded);
    ASSERT_EQ(mine, best) << "iter " << iter;
    EXPECT_EQ(absl::ToInt64Nanoseconds(got->makespan), std::get<0>(best));
    EXPECT_EQ(absl::ToInt64Nanoseconds(got->spread), std::get<1>(best));
    ++checked;
  }
  EXPECT_EQ(checked, 3000);
}

// Classic list scheduling (each next block to the group that would finish it first) gives the
// optimal makespan for identical jobs on uniform machines; an independent check at mid size.
int64_t GreedyMakespan(const std::vector<int64_t>& u, int64_t n_blocks) {
  using Item = std::pair<int64_t, size_t>;  // (finish time if one more block, group)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  int64_t makespan = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    makespan = std::max(makespan, u[i]);  // one block each
    heap.push({2 * u[i], i});
  }
  for (int64_t k = static_cast<int64_t>(u.size()); k < n_blocks; ++k) {
    auto [finish, i] = heap.top();
    heap.pop();
    makespan = std::max(makespan, finish);
    heap.push({finish + u[i], i});
  }
  return makespan;
}

TEST(MicroBatchSolverTest, MakespanMatchesListSchedulingAtMidSize) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    const int d = 2 + static_cast<int>(rng() % 60);
    const int64_t q = 1 + static_cast<int64_t>(rng() % 4);
    std::vector<int64_t> t(d);
    for (auto& x : t) x = 1000 + static_cast<int64_t>(rng() % 3000);
    const int64_t n_blocks = d + static_cast<int64_t>(rng() % (20 * d));
    absl::StatusOr<MicroBatchSplit> got = SolveMicroBatches(Ns(t), n_blocks * q, q);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<int64_t> u(d);
    for (int i = 0; i < d; ++i) u[i] = q * t[i];
    EXPECT_EQ(absl::ToInt64Nanoseconds(got->makespan), GreedyMakespan(u, n_blocks)) << iter;
  }
}

TEST(MicroBatchSolverTest, LargeInstanceHasOptimalityCertificate) {
  std::mt19937_64 rng(3);
  const int d = 16384;
  std::vector<int64_t> t(d);
  for (auto& x : t) x = 900'000 + static_cast<int64_t>(rng() % 200'000);
  for (int i = 0; i < d; i += 50) t[i] *= 2;  // 2% slow groups
  const int64_t q = 4;
  const int64_t m_total = 8 * d * q + 12;
  absl::StatusOr<MicroBatchSplit> got = SolveMicroBatches(Ns(t), m_total, q);
  ASSERT_TRUE(got.ok()) << got.status();
  int64_t sum = 0;
  for (int64_t m : got->micro_batches) sum += m;
  EXPECT_EQ(sum, m_total);
  // No plan beats the makespan: one nanosecond less fits fewer than N blocks.
  const int64_t makespan = absl::ToInt64Nanoseconds(got->makespan);
  int64_t fits = 0;
  for (int64_t x : t) fits += (makespan - 1) / (q * x);
  EXPECT_LT(fits, m_total / q);
  // Slow groups get fewer micro-batches than fast ones.
  EXPECT_LT(got->micro_batches[0], got->micro_batches[1]);
}

TEST(MicroBatchSolverTest, OneSlowGroupGetsFewerMicroBatches) {
  // DP = 4, PP = 2 (q = 2), 32 micro-batches, group 2 is 1.5x slower.
  absl::StatusOr<MicroBatchSplit> got = SolveMicroBatches(
      {absl::Seconds(1), absl::Seconds(1), absl::Seconds(1.5), absl::Seconds(1)}, 32, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  // Even split: 8 each, makespan 12 s. Best: 6 on the slow group (9 s) and 26 = 10 + 8 + 8 on the
  // rest: makespan 10 s, spread 10 - 8 = 2 s is forced (any 9/9/8 split needs odd counts).
  EXPECT_THAT(got->micro_batches, ElementsAre(10, 8, 6, 8));
  EXPECT_EQ(got->makespan, absl::Seconds(10));
  EXPECT_EQ(got->spread, absl::Seconds(2));
}

TEST(MicroBatchSolverTest, ExcludedGroupGetsZero) {
  MicroBatchProblem p;
  p.micro_batch_times = {absl::Seconds(1), absl::Seconds(9), absl::Seconds(1)};
  p.global_micro_batches = 6;
  p.excluded = {false, true, false};
  absl::StatusOr<MicroBatchSplit> got = SolveMicroBatches(p);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->micro_batches, ElementsAre(3, 0, 3));
  EXPECT_EQ(got->makespan, absl::Seconds(3));
  EXPECT_EQ(got->spread, absl::ZeroDuration());
}

TEST(MicroBatchSolverTest, TiesGoToLowerIndexAndResultIsDeterministic) {
  const std::vector<absl::Duration> t(4, absl::Seconds(1));
  absl::StatusOr<MicroBatchSplit> a = SolveMicroBatches(t, 6, 1);
  absl::StatusOr<MicroBatchSplit> b = SolveMicroBatches(t, 6, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(a->micro_batches, ElementsAre(2, 2, 1, 1));
  EXPECT_EQ(a->micro_batches, b->micro_batches);
}

TEST(MicroBatchSolverTest, EvenAndEvaluate) {
  MicroBatchProblem p;
  p.micro_batch_times = {absl::Seconds(1), absl::Seconds(2), absl::Seconds(1)};
  p.global_micro_batches = 8;
  p.multiple = 2;
  absl::StatusOr<MicroBatchSplit> even = EvenMicroBatches(p);
  ASSERT_TRUE(even.ok());
  EXPECT_THAT(even->micro_batches, ElementsAre(4, 2, 2));
  EXPECT_EQ(even->makespan, absl::Seconds(4));
  absl::StatusOr<MicroBatchSplit> eval = EvaluateMicroBatches(p, {2, 4, 2});
  ASSERT_TRUE(eval.ok());
  EXPECT_EQ(eval->makespan, absl::Seconds(8));
  EXPECT_EQ(eval->min_finish, absl::Seconds(2));
  EXPECT_THAT(EvaluateMicroBatches(p, {2, 3, 3}).status().message(), HasSubstr("micro_batches[1]"));
  EXPECT_THAT(EvaluateMicroBatches(p, {2, 2, 2}).status().message(), HasSubstr("sum is 6"));
  EXPECT_THAT(EvaluateMicroBatches(p, {2, 2}).status().message(), HasSubstr("want D = 3"));
}

TEST(MicroBatchSolverTest, BadInputNamesTheField) {
  auto message = [](std::vector<absl::Duration> t, int64_t m, int64_t q) {
    absl::StatusOr<MicroBatchSplit> r = SolveMicroBatches(std::move(t), m, q);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  const absl::Duration s = absl::Seconds(1);
  EXPECT_THAT(message({}, 4, 1), HasSubstr("D = 0"));
  EXPECT_THAT(message({s, s}, 5, 2), HasSubstr("not a multiple of multiple = 2"));
  EXPECT_THAT(message({s, s, s}, 4, 2), HasSubstr("every active group needs"));
  EXPECT_THAT(message({s, absl::ZeroDuration()}, 4, 1), HasSubstr("micro_batch_times[1]"));
  EXPECT_THAT(message({s, -s}, 4, 1), HasSubstr("micro_batch_times[1]"));
  EXPECT_THAT(message({absl::InfiniteDuration(), s}, 4, 1), HasSubstr("micro_batch_times[0]"));
  EXPECT_THAT(message({s, s}, 0, 1), HasSubstr("global_micro_batches"));
  EXPECT_THAT(message({s, s}, 4, 0), HasSubstr("multiple: must be >= 1"));
  MicroBatchProblem p;
  p.micro_batch_times = {s, s};
  p.global_micro_batches = 2;
  p.excluded = {true, true};
  EXPECT_THAT(SolveMicroBatches(p).status().message(), HasSubstr("every DP group is excluded"));
  p.excluded = {true};
  EXPECT_THAT(SolveMicroBatches(p).status().message(), HasSubstr("excluded: has 1 entries"));
}

TEST(MicroBatchSolverTest, SecondsConversionRejectsNaN) {
  absl::StatusOr<std::vector<absl::Duration>> ok = MicroBatchTimesFromSeconds({0.5, 1.25});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[1], absl::Milliseconds(1250));
  absl::StatusOr<std::vector<absl::Duration>> nan =
      MicroBatchTimesFromSeconds({1.0, std::nan("")}, "--times");
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nan.status().message(), HasSubstr("--times[1]: is NaN"));
  EXPECT_THAT(MicroBatchTimesFromSeconds({-1.0}).status().message(),
              HasSubstr("micro_batch_times[0]"));
  EXPECT_THAT(MicroBatchTimesFromSeconds({HUGE_VAL}).status().message(), HasSubstr("finite"));
}

}  // namespace
}  // namespace falcon::analysis::plan
