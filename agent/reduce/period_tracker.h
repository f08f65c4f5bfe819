// Iteration boundaries of one rank from its op stream alone, for trainers that give no
// iteration hints (FALCON_NOTES.md §2.3: "iteration time = time between a communication operation
// and the same operation one period earlier").
//
// Each op is a token (the caller maps (communicator, op kind, peer) to a small integer). A
// PeriodFinder (the ACF period finder of analysis/) finds the period P and the offset of the
// repeating pattern in a window of recent tokens. The tracker then picks an anchor: the shortest
// run of tokens that occurs exactly once per period in the (cyclic) pattern, and reports a
// boundary at the start time of the first op of every later occurrence of the anchor. Stray ops
// between anchors do not move boundaries. The tracker re-runs the finder every `redetect_every`
// ops and re-locks when the period changes, and unlocks when the anchor has not been seen for
// `lost_periods` periods.
//
// Not thread-safe (one per rank).
#ifndef FALCON_AGENT_REDUCE_PERIOD_TRACKER_H_
#define FALCON_AGENT_REDUCE_PERIOD_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace falcon::agent::reduce {

// A pattern found in a token window: tokens[offset, offset + period) repeat.
struct PeriodFit {
  int period = 0;  // >= 1.
  int offset = 0;  // In [0, window size - period].
};

// Returns the period of `tokens`, or nullopt when no period is found.
using PeriodFinder = std::function<std::optional<PeriodFit>(absl::Span<const int32_t> tokens)>;

class PeriodTracker {
 public:
  struct Options {
    size_t window = 2048;          // Tokens the finder looks at; >= 2 * the longest period.
    size_t min_window = 256;       // Tokens needed before the first search.
    size_t redetect_every = 1024;  // Tokens between searches (also while locked).
    int lost_periods = 3;          // Unlock after this many periods without an anchor.
    size_t max_anchor = 8;         // Longest anchor tried.
  };

  PeriodTracker(Options options, PeriodFinder finder);

  // Feeds the next op. Returns the start time of the op that begins a new iteration when this op
  // completes an anchor occurrence; nullopt otherwise.
  std::optional<int64_t> Add(int32_t token, int64_t start_ns);

  bool locked() const { return !anchor_.empty(); }
  int period() const { return period_; }  // 0 when unlocked.
  uint64_t relocks() const { return relocks_; }

 private:
  void Detect();
  // Shortest run of `pattern` (cyclic) that occurs exactly once; empty when none fits.
  std::vector<int32_t> ChooseAnchor(const std::vector<int32_t>& pattern) const;

  const Options options_;
  PeriodFinder finder_;
  std::deque<int32_t> window_;
  std::deque<std::pair<int32_t, int64_t>> recent_;  // Last max_anchor (token, start_ns).
  size_t since_detect_ = 0;
  bool searched_once_ = false;
  int period_ = 0;
  std::vector<int32_t> anchor_;
  size_t since_anchor_ = 0;
  uint64_t relocks_ = 0;
};

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_PERIOD_TRACKER_H_
