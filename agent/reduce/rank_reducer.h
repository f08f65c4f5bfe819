// Splits one rank's op stream into iterations (the first step of the agent's edge reduction).
//
// Two sources of boundaries:
//  * Hints (IterationHint from the trainer): iteration i spans [start_ns, end_ns) of its hint and
//    holds the ops stamped with iteration i, or, when unstamped (-1), the ops starting inside that
//    span. Iteration i is complete once an op of a later iteration (or starting at or after
//    end_ns) has arrived, or `hint_hold` after its hint arrived. Summaries say from_hint = true.
//  * No hints: analysis::IterationTracker (ACF period, docs/algorithms.md#iteration-period-acf)
//  reports each
//    iteration as the span between two occurrences of its anchor op; iteration k holds the ops
//    starting in [start, end) and is numbered from 0 per rank, continuing across sessions.
//    Each op is a symbol of (op kind, communicator, peer).
// The first hint switches a rank to hints for good. Ops that fall in no iteration (before the
// first boundary, or late) are counted as unassigned and dropped.
//
// Memory: held ops are bounded by `max_held_ops` (oldest dropped, counted).
// Not thread-safe (the job reducer owns one per rank).
#ifndef FALCON_AGENT_REDUCE_RANK_REDUCER_H_
#define FALCON_AGENT_REDUCE_RANK_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/reduce/held_op.h"
#include "analysis/detect/period_finder.h"
#include "proto/falcon/v1/shim.pb.h"

namespace falcon::agent::reduce {

// One complete iteration of one rank, with its ops.
struct IterationDraft {
  int64_t iteration = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // > start_ns.
  bool from_hint = false;
  int64_t plan_version = 0;
  int64_t completed_at_ns = 0;  // Agent monotonic time the draft became complete.
  std::vector<HeldOp> ops;
};

class RankReducer {
 public:
  struct Options {
    absl::Duration hint_hold = absl::Seconds(5);          // Wait for late ops after a hint.
    size_t max_held_ops = 1 << 20;                        // Ops held per rank at most.
    analysis::detect::IterationTracker::Options tracker;  // Period finding without hints.
  };

  struct Stats {
    uint64_t unassigned_ops = 0;    // Dropped: in no iteration.
    uint64_t overflow_ops = 0;      // Dropped: over max_held_ops.
    uint64_t empty_iterations = 0;  // Boundaries with zero length, skipped.
    uint64_t unordered_ops = 0;     // Started before the previous op: not fed to the tracker.
  };

  // kInvalidArgument when options.tracker is invalid.
  static absl::Status Validate(const Options& options);
  // REQUIRES: Validate(options).ok().
  RankReducer(uint32_t rank, Options options);

  // Adds one op (already validated); `op.key`/`op.matched` are set by the caller.
  void AddOp(const HeldOp& op);
  // Adds a hint (already validated: iterations increase). `now_ns`: agent monotonic time.
  void AddHint(const v1::IterationHint& hint, int64_t now_ns);

  // Moves complete iterations, oldest first, into `out`. `flush_all`: treat every hinted
  // iteration as complete (drain).
  void TakeCompleted(int64_t now_ns, bool flush_all, std::vector<IterationDraft>* out);

  // Plan version stamped on iterations found without hints (from applied directives).
  void set_plan_version(int64_t v) { plan_version_ = v; }
  // Next iteration number in period mode (kept across shim sessions of the same rank).
  int64_t next_period_iteration() const { return next_period_iteration_; }
  void set_next_period_iteration(int64_t i) { next_period_iteration_ = i; }

  // The op's symbol for the period finder: (op kind, communicator, peer).
  static uint64_t Symbol(const HeldOp& op);
  bool hinted() const { return hinted_; }
  const analysis::detect::IterationTracker& tracker() const { return tracker_; }
  size_t held_ops() const { return ops_.size() + stamped_count_; }
  const Stats& stats() const { return stats_; }
  uint32_t rank() const { return rank_; }

 private:
  struct Hint {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    int64_t plan_version = 0;
    int64_t arrived_ns = 0;
  };
  bool HintComplete(int64_t iteration, const Hint& hint, int64_t now_ns) const;
  void TakeHinted(int64_t now_ns, bool flush_all, std::vector<IterationDraft>* out);
  void TakePeriodic(int64_t now_ns, std::vector<IterationDraft>* out);

  const uint32_t rank_;
  const Options options_;
  analysis::detect::IterationTracker tracker_;
  void DropOldest();

  std::deque<HeldOp> ops_;  // Unstamped ops (all ops without hints), in arrival order.
  // With hints: ops stamped by the shim, by iteration.
  std::map<int64_t, std::vector<HeldOp>> stamped_;
  size_t stamped_count_ = 0;
  bool hinted_ = false;
  std::map<int64_t, Hint> hints_;
  int64_t max_op_iteration_ = -1;
  int64_t max_op_start_ns_ = -1;
  std::deque<std::pair<int64_t, int64_t>> spans_;  // Period mode: [start, end) not yet taken.
  int64_t next_period_iteration_ = 0;
  int64_t plan_version_ = 0;
  Stats stats_;
};

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_RANK_REDUCER_H_
