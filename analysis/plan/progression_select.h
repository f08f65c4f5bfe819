// Order statistics over unions of integer arithmetic progressions: the exact core of the S2
// micro-batch solver (docs/algorithms.md#s2-micro-batch-solver). Two families:
//   Progression:    values k·step          for integer k in [first, last] (int64);
//   OddProgression: values (2k − 1)·weight for integer k in [first, last] (128-bit), which is
//                   the marginal cost x² − (x − u)² of the k-th block of size u when weight = u².
// The union is a multiset: equal values from different progressions count separately.
//
// Everything is integer arithmetic, so results are exact. Pure functions; thread-compatible.
#ifndef FALCON_ANALYSIS_PLAN_PROGRESSION_SELECT_H_
#define FALCON_ANALYSIS_PLAN_PROGRESSION_SELECT_H_

#include <cstdint>
#include <vector>

namespace falcon::analysis::plan {

using Int128 = __int128;

// k·step for k in [first, last]. REQUIRES: step >= 1, first >= 1, last >= first − 1
// (last == first − 1 is empty), last·step fits in int64.
struct Progression {
  int64_t step = 1;
  int64_t first = 1;
  int64_t last = 0;
};

// (2k − 1)·weight for k in [first, last]. REQUIRES: weight >= 1, first >= 1,
// last >= first − 1, 2·last·weight < 2^126.
struct OddProgression {
  Int128 weight = 1;
  int64_t first = 1;
  int64_t last = 0;
};

// Number of values <= `value` in one progression, or over all of them.
int64_t CountAtMost(const Progression& p, int64_t value);
int64_t CountAtMost(const std::vector<Progression>& progressions, int64_t value);
int64_t CountAtMost(const OddProgression& p, Int128 value);
int64_t CountAtMost(const std::vector<OddProgression>& progressions, Int128 value);

// Total number of values (with multiplicity).
int64_t TotalCount(const std::vector<Progression>& progressions);
int64_t TotalCount(const std::vector<OddProgression>& progressions);

// The r-th smallest value (1-based) of the union: the smallest v with CountAtMost(v) >= r.
// REQUIRES: 1 <= r <= TotalCount(progressions).
//
// Cost: O(D) per counting pass over the D progressions. Alternating interpolation and bisection
// passes shrink the value range until it holds at most max(64, 2·D) values, which are then
// enumerated and selected with nth_element: O(D) passes in the worst case bounded by the bits of
// the value range, a handful in practice.
int64_t SelectValue(const std::vector<Progression>& progressions, int64_t r);
Int128 SelectValue(const std::vector<OddProgression>& progressions, int64_t r);

}  // namespace falcon::analysis::plan

#endif  // FALCON_ANALYSIS_PLAN_PROGRESSION_SELECT_H_
