#include "analysis/plan/progression_select.h"

#include <algorithm>
#include <cassert>

namespace falcon::analysis::plan {
namespace {

// Value of the k-th term, and the largest k whose term is <= v (v >= 0).
int64_t Term(const Progression& p, int64_t k) { return k * p.step; }
int64_t MaxIndexAtMost(const Progression& p, int64_t v) { return v / p.step; }
Int128 Term(const OddProgression& p, int64_t k) {
  return (2 * static_cast<Int128>(k) - 1) * p.weight;
}
int64_t MaxIndexAtMost(const OddProgression& p, Int128 v) {
  // (2k − 1)·w <= v  ⇔  k <= (v + w) / (2w). A 128-bit division is slow, so estimate the
  // quotient in long double (64-bit mantissa) and correct it with exact multiplications.
  const Int128 num = v + p.weight, den = 2 * p.weight;
  Int128 k = static_cast<Int128>(static_cast<long double>(num) / static_cast<long double>(den));
  while (k > 0 && k * den > num) --k;
  while ((k + 1) * den <= num) ++k;
  return static_cast<int64_t>(k);
}

template <typename P, typename V>
int64_t CountOne(const P& p, V value) {
  if (p.last < p.first || value < Term(p, p.first)) return 0;
  return std::min(MaxIndexAtMost(p, value), p.last) - p.first + 1;
}

template <typename P, typename V>
int64_t CountAll(const std::vector<P>& ps, V value) {
  int64_t count = 0;
  for (const P& p : ps) count += CountOne(p, value);
  return count;
}

template <typename P>
int64_t Total(const std::vector<P>& ps) {
  int64_t count = 0;
  for (const P& p : ps) {
    if (p.last >= p.first) count += p.last - p.first + 1;
  }
  return count;
}

template <typename P, typename V>
V Select(const std::vector<P>& ps, int64_t r) {
  // Invariant: CountAll(lo) = count_lo < r <= count_hi = CountAll(hi).
  bool any = false;
  V lo = 0;
  V hi = 0;
  for (const P& p : ps) {
    if (p.last < p.first) continue;
    const V first = Term(p, p.first) - 1;
    const V last = Term(p, p.last);
    lo = any ? std::min(lo, first) : first;
    hi = any ? std::max(hi, last) : last;
    any = true;
  }
  int64_t count_lo = 0;
  int64_t count_hi = Total(ps);
  assert(any && r >= 1 && r <= count_hi);
  const int64_t cap = std::max<int64_t>(64, 2 * static_cast<int64_t>(ps.size()));
  for (int pass = 0; count_hi - count_lo > cap; ++pass) {
    if (hi - lo <= 1) return hi;  // every value in (lo, hi] equals hi
    V probe;
    if (pass % 2 == 0) {
      // Interpolation: the count grows roughly linearly with the value.
      const long double fraction = (static_cast<long double>(r - count_lo) - 0.5L) /
                                   static_cast<long double>(count_hi - count_lo);
      probe = lo + static_cast<V>(fraction * static_cast<long double>(hi - lo));
    } else {
      probe = lo + (hi - lo) / 2;  // bisection guarantees progress
    }
    probe = std::clamp<V>(probe, lo + 1, hi - 1);
    const int64_t count = CountAll(ps, probe);
    if (count >= r) {
      hi = probe;
      count_hi = count;
    } else {
      lo = probe;
      count_lo = count;
    }
  }
  // Enumerate the values in (lo, hi]: exactly count_hi − count_lo of them.
  std::vector<V> candidates;
  candidates.reserve(static_cast<size_t>(count_hi - count_lo));
  for (const P& p : ps) {
    if (p.last < p.first) continue;
    const int64_t k_begin = std::max(p.first, lo < 0 ? p.first : MaxIndexAtMost(p, lo) + 1);
    const int64_t k_end = std::min(p.last, MaxIndexAtMost(p, hi));
    for (int64_t k = k_begin; k <= k_end; ++k) candidates.push_back(Term(p, k));
  }
  const auto nth = candidates.begin() + (r - count_lo - 1);
  std::nth_element(candidates.begin(), nth, candidates.end());
  return *nth;
}

}  // namespace

int64_t CountAtMost(const Progression& p, int64_t value) { return CountOne(p, value); }
int64_t CountAtMost(const std::vector<Progression>& ps, int64_t value) {
  return CountAll(ps, value);
}
int64_t CountAtMost(const OddProgression& p, Int128 value) { return CountOne(p, value); }
int64_t CountAtMost(const std::vector<OddProgression>& ps, Int128 value) {
  return CountAll(ps, value);
}
int64_t TotalCount(const std::vector<Progression>& ps) { return Total(ps); }
int64_t TotalCount(const std::vector<OddProgression>& ps) { return Total(ps); }
int64_t SelectValue(const std::vector<Progression>& ps, int64_t r) {
  return Select<Progression, int64_t>(ps, r);
}
Int128 SelectValue(const std::vector<OddProgression>& ps, int64_t r) {
  return Select<OddProgression, Int128>(ps, r);
}

}  // namespace falcon::analysis::plan
