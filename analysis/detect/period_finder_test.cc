#include "analysis/detect/period_finder.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kOpSpacingNs = 1000;

// A generated op stream: each iteration repeats `pattern` (ops kOpSpacingNs apart from the
// iteration's start), iterations last a random duration, a rare op ends every `rare_every`-th
// iteration (0: never), and stray ops with never-repeating symbols are sprinkled in.
struct Stream {
  std::vector<OpEvent> ops;
  std::vector<int64_t> iteration_of;  // Per op; -1 for stray ops.
  std::vector<int64_t> starts_ns;     // Iteration starts, one more than iterations.
};

Stream Generate(const std::vector<uint64_t>& pattern, int iterations, double stray_rate,
                int rare_every, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> jitter(0, 100000);
  std::bernoulli_distribution stray(stray_rate);
  Stream s;
  int64_t t = 1'000'000;
  const int64_t p = static_cast<int64_t>(pattern.size());
  for (int i = 0; i < iterations; ++i) {
    s.starts_ns.push_back(t);
    for (int64_t j = 0; j <= p; ++j) {
      if (j < p) {
        s.ops.push_back({pattern[j], t + j * kOpSpacingNs});
        s.iteration_of.push_back(i);
      } else if (rare_every > 0 && i % rare_every == rare_every - 1) {
        s.ops.push_back({0xEEEE, t + j * kOpSpacingNs});
        s.iteration_of.push_back(i);
      }
      if (stray(rng)) {
        s.ops.push_back({1'000'000 + rng() % 1'000'000'000, s.ops.back().timestamp_ns});
        s.iteration_of.push_back(-1);
      }
    }
    t += (p + 2) * kOpSpacingNs + jitter(rng);
  }
  s.starts_ns.push_back(t);
  return s;
}

// A pattern of exactly `p` ops whose shortest period is p: symbols from a vocabulary of
// min(p, 8), each used about equally often, shuffled.
std::vector<uint64_t> Pattern(int p, uint32_t seed) {
  std::mt19937 rng(seed);
  const int vocab = std::min(p, 8);
  std::vector<uint64_t> out(p);
  for (int i = 0; i < p; ++i) out[i] = OpSymbol(1 + i % vocab, 100 + i % vocab);
  for (;;) {
    std::shuffle(out.begin(), out.end(), rng);
    bool shorter = false;
    for (int q = 1; q < p && !shorter; ++q) {
      if (p % q != 0) continue;
      shorter = true;
      for (int i = q; i < p && shorter; ++i) shorter = out[i] == out[i % q];
    }
    if (!shorter) return out;
  }
}

void ExpectIterationTimesExact(const Stream& s, const PeriodResult& r) {
  ASSERT_GE(r.boundaries.size(), 2u);
  ASSERT_EQ(r.iteration_times.size(), r.boundaries.size() - 1);
  for (size_t i = 0; i + 1 < r.boundaries.size(); ++i) {
    const int64_t it = s.iteration_of[r.boundaries[i]];
    ASSERT_EQ(s.iteration_of[r.boundaries[i + 1]], it + 1);
    EXPECT_EQ(r.iteration_times[i], absl::Nanoseconds(s.starts_ns[it + 1] - s.starts_ns[it]));
  }
}

TEST(FindPeriodTest, ExactForPeriodsOneToTwoHundredWithNoiseOps) {
  PeriodOptions o;
  for (int p = 1; p <= 200; ++p) {
    const Stream s = Generate(Pattern(p, p), 4500 / p + 3, 0.02, p >= 2 ? 3 : 0, 1000 + p);
    absl::StatusOr<PeriodResult> r = FindPeriod(s.ops, o);
    ASSERT_TRUE(r.ok()) << "p=" << p << ": " << r.status();
    EXPECT_EQ(r->period, p);
    EXPECT_GE(r->acf, 0.95);
    EXPECT_EQ(r->offset, r->boundaries.front());
    if (p >= 2) {
      EXPECT_TRUE(std::binary_search(r->ignored_symbols.begin(), r->ignored_symbols.end(),
                                     uint64_t{0xEEEE}));
    }
    ExpectIterationTimesExact(s, *r);
    if (HasFailure()) FAIL() << "p=" << p;
  }
}

TEST(FindPeriodTest, AnchorRepeatedWithinTheIteration) {
  const uint64_t a = 1, b = 2, c = 3;
  const Stream s = Generate({a, b, a, b, c, c}, 500, 0.0, 0, 3);
  const PeriodResult r = *FindPeriod(s.ops, PeriodOptions());
  EXPECT_EQ(r.period, 6);
  EXPECT_EQ(r.anchor_per_period, 2);
  ExpectIterationTimesExact(s, r);
}

TEST(FindPeriodTest, FollowsAPeriodChangeInTheWindow) {
  Stream first = Generate(Pattern(12, 1), 600, 0.01, 0, 1);
  const Stream second = Generate(Pattern(37, 2), 200, 0.01, 0, 2);
  const int64_t shift = first.starts_ns.back();
  for (OpEvent op : second.ops) {
    op.timestamp_ns += shift;
    first.ops.push_back(op);
  }
  PeriodOptions o;
  o.window = 4096;
  EXPECT_EQ(FindPeriod(first.ops, o)->period, 37);
  EXPECT_EQ(FindPeriod(absl::MakeSpan(first.ops).first(7000), o)->period, 12);
}

TEST(FindPeriodTest, ListedSymbolsAreIgnored) {
  // With a single regular symbol the rare op is half the vocabulary, so it is kept unless listed.
  const Stream s = Generate({7}, 3000, 0.0, 3, 4);
  EXPECT_EQ(FindPeriod(s.ops, PeriodOptions())->period, 4);
  PeriodOptions o;
  o.ignore_symbols = {0xEEEE};
  const PeriodResult r = *FindPeriod(s.ops, o);
  EXPECT_EQ(r.period, 1);
  ExpectIterationTimesExact(s, r);
}

TEST(FindPeriodTest, NoPeriodInRandomOps) {
  std::mt19937 rng(5);
  std::vector<OpEvent> ops;
  for (int i = 0; i < 3000; ++i) ops.push_back({rng() % 6, i * kOpSpacingNs});
  EXPECT_EQ(FindPeriod(ops, PeriodOptions()).status().code(), absl::StatusCode::kNotFound);
}

TEST(FindPeriodTest, RejectsBadInputNamingIt) {
  std::vector<OpEvent> ops = {{1, 10}, {2, 20}, {1, 5}};
  EXPECT_THAT(FindPeriod(ops, PeriodOptions()).status().message(), HasSubstr("op 2"));
  EXPECT_EQ(FindPeriod({}, PeriodOptions()).status().code(), absl::StatusCode::kFailedPrecondition);
  PeriodOptions o;
  o.threshold = 0;
  EXPECT_THAT(FindPeriod(ops, o).status().message(), HasSubstr("threshold"));
  o = PeriodOptions();
  o.max_lag = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("max_lag"));
}

TEST(OpSymbolTest, DistinguishesKindAndCommunicator) {
  EXPECT_EQ(OpSymbol(1, 42), OpSymbol(1, 42));
  EXPECT_NE(OpSymbol(1, 42), OpSymbol(2, 42));
  EXPECT_NE(OpSymbol(1, 42), OpSymbol(1, 43));
}

TEST(IterationTrackerTest, EmitsIterationTimesAndRedetectsAfterAChange) {
  Stream s = Generate(Pattern(10, 1), 800, 0.01, 4, 1);
  const Stream second = Generate(Pattern(25, 2), 800, 0.01, 0, 2);
  const size_t switch_at = s.ops.size();
  const int64_t shift = s.starts_ns.back();
  const int64_t first_iterations = static_cast<int64_t>(s.starts_ns.size()) - 1;
  s.starts_ns.pop_back();
  for (int64_t t : second.starts_ns) s.starts_ns.push_back(t + shift);
  for (size_t i = 0; i < second.ops.size(); ++i) {
    s.ops.push_back({second.ops[i].symbol, second.ops[i].timestamp_ns + shift});
    s.iteration_of.push_back(
        second.iteration_of[i] < 0 ? -1 : second.iteration_of[i] + first_iterations);
  }
  IterationTracker tracker = *IterationTracker::Create(IterationTracker::Options());
  int before = 0, after = 0;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const std::optional<absl::Duration> d = *tracker.Add(s.ops[i]);
    if (i == switch_at - 1) {
      EXPECT_EQ(tracker.period(), 10);
    }
    if (!d.has_value()) continue;
    // The op closing iteration k (its anchor) belongs to iteration k + 1.
    const int64_t it = s.iteration_of[i];
    ASSERT_GE(it, 1);
    EXPECT_EQ(*d, absl::Nanoseconds(s.starts_ns[it] - s.starts_ns[it - 1]))
        << "op " << i << " switch " << switch_at << " period " << *tracker.period();
    (i < switch_at ? before : after)++;
  }
  EXPECT_EQ(tracker.period(), 25);
  EXPECT_GT(before, 600);
  EXPECT_GT(after, 500);
  EXPECT_FALSE(tracker.Add({1, 0}).ok());
}

}  // namespace
}  // namespace falcon::analysis::detect
