#include "analysis/plan/progression_select.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::analysis::plan {
namespace {

template <typename P, typename V>
std::vector<V> Expand(const std::vector<P>& ps, V (*term)(const P&, int64_t)) {
  std::vector<V> all;
  for (const P& p : ps) {
    for (int64_t k = p.first; k <= p.last; ++k) all.push_back(term(p, k));
  }
  std::sort(all.begin(), all.end());
  return all;
}

int64_t Product(const Progression& p, int64_t k) { return k * p.step; }
Int128 Odd(const OddProgression& p, int64_t k) { return (2 * Int128{k} - 1) * p.weight; }

TEST(ProgressionSelectTest, CountsValues) {
  const Progression p{3, 2, 5};  // 6, 9, 12, 15
  EXPECT_EQ(CountAtMost(p, 5), 0);
  EXPECT_EQ(CountAtMost(p, 6), 1);
  EXPECT_EQ(CountAtMost(p, 14), 3);
  EXPECT_EQ(CountAtMost(p, 100), 4);
  EXPECT_EQ(CountAtMost(Progression{3, 2, 1}, 100), 0);  // empty
  EXPECT_EQ(TotalCount({p, Progression{1, 1, 3}, Progression{7, 4, 3}}), 7);
  const OddProgression q{4, 2, 4};  // 12, 20, 28
  EXPECT_EQ(CountAtMost(q, 11), 0);
  EXPECT_EQ(CountAtMost(q, 12), 1);
  EXPECT_EQ(CountAtMost(q, 27), 2);
  EXPECT_EQ(CountAtMost(q, 1000), 3);
}

TEST(ProgressionSelectTest, MatchesSortedExpansion) {
  std::mt19937_64 rng(1);
  for (int iter = 0; iter < 500; ++iter) {
    // Enough progressions and values that the range-shrinking loop runs (cap = 64).
    const int d = 1 + static_cast<int>(rng() % 40);
    std::vector<Progression> ps(d);
    std::vector<OddProgression> qs(d);
    for (int i = 0; i < d; ++i) {
      const int64_t step = 1 + static_cast<int64_t>(rng() % (iter % 2 ? 5 : 100000));
      const int64_t first = 1 + static_cast<int64_t>(rng() % 20);
      const int64_t last = first - 1 + static_cast<int64_t>(rng() % 60);
      ps[i] = Progression{step, first, last};
      qs[i] = OddProgression{Int128{step} * step, first, last};
    }
    const std::vector<int64_t> sorted = Expand<Progression, int64_t>(ps, &Product);
    const std::vector<Int128> odd = Expand<OddProgression, Int128>(qs, &Odd);
    if (sorted.empty()) continue;
    for (int k = 0; k < 5; ++k) {
      const int64_t r = 1 + static_cast<int64_t>(rng() % sorted.size());
      ASSERT_EQ(SelectValue(ps, r), sorted[r - 1]) << "iter " << iter << " r " << r;
      ASSERT_TRUE(SelectValue(qs, r) == odd[r - 1]) << "iter " << iter << " r " << r;
    }
    ASSERT_EQ(SelectValue(ps, 1), sorted.front());
    ASSERT_EQ(SelectValue(ps, static_cast<int64_t>(sorted.size())), sorted.back());
  }
}

TEST(ProgressionSelectTest, ManyEqualValues) {
  // 1000 identical progressions: the value range collapses before the count does.
  const std::vector<Progression> ps(1000, Progression{5, 1, 10});
  EXPECT_EQ(SelectValue(ps, 1), 5);
  EXPECT_EQ(SelectValue(ps, 1000), 5);
  EXPECT_EQ(SelectValue(ps, 1001), 10);
  EXPECT_EQ(SelectValue(ps, 10000), 50);
}

TEST(ProgressionSelectTest, HugeOddWeightsStayExact) {
  // Block sizes near the solver's limit (4e18 ns) squared: 1.6e37, still exact in 128 bits.
  const Int128 u = 4'000'000'000'000'000'000;
  const std::vector<OddProgression> qs = {{u * u, 1, 1}, {(u - 1) * (u - 1), 1, 1}};
  EXPECT_TRUE(SelectValue(qs, 1) == (u - 1) * (u - 1));
  EXPECT_TRUE(SelectValue(qs, 2) == u * u);
}

}  // namespace
}  // namespace falcon::analysis::plan
