// Workload imbalance, told apart from a fail-slow (docs/algorithms.md#workload-imbalance): over
// many iterations of per-rank compute times, grouped by pipeline stage,
// - a *stage imbalance*: one stage's compute is persistently above the others' (it was
//   partitioned with too much work: the last stage with the LM head and loss, for example). The
//   finding names the stage, its ratio over the median of the other stages, and the share of its
//   compute that would have to move to the other stages to balance them;
// - *data-dependent jitter*: compute varies across the DP replicas of a stage from iteration to
//   iteration (sequence lengths), and the slowest replica changes: many ranks are sometimes
//   slow, none persistently. No rank is to blame;
// - *persistent stragglers*: ranks above the other ranks of their stage by the threshold in
//   most iterations or in a long run of them: fail-slows (the ByteDance AR trace's rank 0), not
//   imbalance.
// Source: the ByteDance straggler study (OSDI'25) finds that many slow steps in production come
// from stage partitioning or sequence-length imbalance, not hardware; the rules and thresholds are
// Falcon's. Pure.
#ifndef FALCON_ANALYSIS_DETECT_IMBALANCE_H_
#define FALCON_ANALYSIS_DETECT_IMBALANCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/detect/blame.h"

namespace falcon::analysis::detect {

struct ImbalanceOptions {
  // A rank is slow in an iteration at compute >= (1 + slow_ratio) x its stage's median that
  // iteration; a stage is imbalanced at median >= (1 + slow_ratio) x the other stages' median.
  // (0, 10]. Default 0.10, the verification threshold.
  double slow_ratio = 0.10;
  // A rank slow in at least this share of the iterations is a persistent straggler, (0, 1];
  // so is one slow in a run of consecutive iterations at least max(min_run, run_share x the
  // iterations) long (a fail-slow that began or ended within the window).
  double persistent_share = 0.5;
  int min_run = 8;          // [1, 1000000].
  double run_share = 0.25;  // [0, 1].
  // Jitter: at least this share of the ranks is slow in some iteration, (0, 1].
  double jitter_rank_share = 0.25;
  // At least this many iterations with compute figures, [2, 1000000].
  int min_steps = 10;

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

struct StageImbalance {
  int64_t stage = 0;         // BlameInput RankCompute.group.
  int ranks = 0;             // Its ranks; with 1, a partition and a slow GPU look alike.
  double ratio = 1;          // Its median compute / the median of the other stages' medians.
  double slowest_share = 0;  // Share of iterations in which it was the slowest stage.
  // Share of its compute to move to the other stages to reach their mean: 1 - mean / own, where
  // mean is over all stages (layers are the unit of such a move in practice).
  double shed_fraction = 0;
};

struct DataJitter {
  // Median over (iteration, stage) of (max - min) / median of the stage's ranks' compute.
  double median_spread = 0;
  int ranks_sometimes_slow = 0;  // Ranks slow in at least one iteration.
  int ranks = 0;
  double max_slow_share = 0;  // The largest share of iterations any one rank was slow in.
};

struct PersistentStraggler {
  int64_t rank = 0;
  int64_t stage = 0;
  double slow_share = 0;  // Share of the iterations it was slow in.
  int slow_iterations = 0;
  int iterations = 0;  // Iterations it was compared in.
  // Median, over the iterations it was slow in, of its compute / the median of the other ranks
  // of its stage.
  double ratio = 1;
  int64_t first_step = 0;  // Its longest run of slow iterations.
  int64_t last_step = 0;
};

struct ImbalanceReport {
  int steps = 0;  // Iterations with at least two ranks of one stage or two stages.
  int stages = 0;
  int ranks = 0;
  std::vector<double> stage_compute_s;  // Median compute per stage, ascending stage, seconds.
  std::optional<StageImbalance> stage_imbalance;
  std::optional<DataJitter> jitter;
  std::vector<PersistentStraggler> stragglers;  // Largest ratio first.
};

// `steps`: per iteration, every rank's compute time and stage (RankCompute.group); comms are not
// used. kInvalidArgument: bad options, fewer than min_steps iterations, a negative compute time,
// a rank in two stages (named with both steps).
absl::StatusOr<ImbalanceReport> AnalyzeImbalance(const std::vector<BlameInput>& steps,
                                                 const ImbalanceOptions& options = {});

// The report in an operator's words, one finding a line; "no workload imbalance and no
// persistent straggler" when there is nothing.
std::vector<std::string> DescribeImbalance(const ImbalanceReport& report,
                                           const ImbalanceOptions& options = {});

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_IMBALANCE_H_
