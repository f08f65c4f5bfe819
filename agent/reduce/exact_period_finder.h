// Test double for the ACF period finder: the smallest lag k (1..max_lag) at which at least
// `min_match` of the overlapping tokens equal the token k later, with offset 0. Exact on clean
// periodic streams; used to test the tracker independently of analysis/.
#ifndef FALCON_AGENT_REDUCE_EXACT_PERIOD_FINDER_H_
#define FALCON_AGENT_REDUCE_EXACT_PERIOD_FINDER_H_

#include <optional>

#include "agent/reduce/period_tracker.h"

namespace falcon::agent::reduce {

inline PeriodFinder ExactPeriodFinder(int max_lag = 200, double min_match = 0.95) {
  return [max_lag, min_match](absl::Span<const int32_t> t) -> std::optional<PeriodFit> {
    const int n = static_cast<int>(t.size());
    for (int k = 1; k <= max_lag && 2 * k <= n; ++k) {
      int same = 0;
      for (int i = 0; i + k < n; ++i) same += t[i] == t[i + k];
      if (same >= min_match * (n - k)) return PeriodFit{k, 0};
    }
    return std::nullopt;
  };
}

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_EXACT_PERIOD_FINDER_H_
