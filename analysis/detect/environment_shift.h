// Environment shifts (docs/algorithms.md#environment-shifts): whether a verified slowdown of an
// iteration-time series is the environment's — every rank's compute slowed alike, as load from
// outside the job on shared machines slows every device — rather than a fail-slow of a part of
// the job (one rank's compute, or communication, whose compute stays flat).
//
// Input: the per-rank compute times (any one unit, > 0) over the two stretches a verified change
// compared, one column per rank, one row per iteration, NaN where a rank reported nothing (an
// iteration fewer than half the ranks reported counts for no typical compute). The judgement,
// with threshold θ (the verification ratio):
//  - the *typical compute* of an iteration is the lower quartile across ranks (the smaller value
//    of two) of each rank's compute over its own median before the change, so a quarter of the
//    ranks may be slow for their own reasons without moving it; the *environment factor* E is its
//    median over the stretch after over its median over the stretch before;
//  - a rank *stands out* when its own factor (median after / median before) exceeds the median
//    factor of the other ranks of its pipeline stage (of every other rank when it has none) by
//    more than 1 + 5θ (the OS alone made one rank's compute up to 1.40x its peers' for several
//    iterations in healthy runs on a loaded 2-core machine);
//  - the change is an environment shift when at least 2 ranks have compute on both sides, no
//    rank stands out, E >= 1 + θ / 2, and E - 1 >= (r - 1) / 5 for the series' ratio r (on a
//    loaded CPU the iteration time rises up to ~4x as much as compute, since communication
//    slows too; a fault far larger than the compute rise is not the environment's).
// Pure and deterministic.
#ifndef FALCON_ANALYSIS_DETECT_ENVIRONMENT_SHIFT_H_
#define FALCON_ANALYSIS_DETECT_ENVIRONMENT_SHIFT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

// Compute times over one stretch of iterations: values[r][i] is rank column r's compute time at
// the stretch's i-th iteration (> 0, NaN where missing); every column has the same length.
struct ComputeStretch {
  std::vector<std::vector<double>> values;
};

// What the stretch before a change says about compute: per rank column its median (NaN without
// values) and the typical compute's median (NaN when no iteration has 2 ranks). Kept so that a
// later stretch can be judged against the level before an earlier change.
struct ComputeBaseline {
  std::vector<int32_t> stages;  // Pipeline stage of each rank column; -1 when unknown.
  std::vector<double> rank_levels;
  double typical = 0;
};

// On a loaded CPU a job's iteration time rises up to ~4x as much as its compute (measured 3.6 and
// 4.1: communication slows too); the environment must account for at least 1 / this of a
// series' rise (E - 1 >= (r - 1) / kMaxAmplification).
inline constexpr double kMaxAmplification = 5.0;

struct EnvironmentOptions {
  double min_relative_change = 0.10;  // θ, the verification ratio, (0, 10].
  absl::Status Validate() const;
};

struct EnvironmentJudgement {
  bool environment = false;      // The change is an environment shift.
  double factor = 0;             // E; 0 when it could not be measured.
  int ranks = 0;                 // Rank columns with compute on both sides.
  int64_t standout_column = -1;  // Column of the rank that stands out most; -1 none measured.
  double standout_excess = 0;    // Its factor over its peers' median factor.
  std::string reason;            // Why (not): for logs and the tests.
};

// The baseline of `before`. kInvalidArgument: `stages` and the columns differ in number, columns
// differ in length, or a value is <= 0 or infinite (NaN is "missing").
absl::StatusOr<ComputeBaseline> MeasureBaseline(absl::Span<const int32_t> stages,
                                                const ComputeStretch& before);

// Judges a change of ratio `series_ratio` (mean after / mean before, > 0) from `baseline` to
// `after`. kInvalidArgument: `after` has a column count other than the baseline's, columns of
// different lengths, a bad value, a ratio <= 0 or not finite, or bad options.
absl::StatusOr<EnvironmentJudgement> JudgeEnvironment(double series_ratio,
                                                      const ComputeBaseline& baseline,
                                                      const ComputeStretch& after,
                                                      const EnvironmentOptions& options);

// The typical compute of each iteration of `stretch` over `baseline`'s (1: as before the
// baseline's change), NaN for an iteration without the compute of 2 ranks with a level.
// kInvalidArgument as JudgeEnvironment for `stretch`, or a baseline without a typical level.
absl::StatusOr<std::vector<double>> TypicalCompute(const ComputeBaseline& baseline,
                                                   const ComputeStretch& stretch);

// Communication's side of the judgement: outside load slows every communicator's transfers
// alike (Gloo moves bytes on the loaded CPUs), a slow link or NIC slows the communicators that
// use it far more than the others. On a 2-core machine a link fault can even raise every rank's
// compute (measured x1.1-1.4 at a DP link cap's onset: the ranks' compute phases line up behind
// the slow all-reduce and share the CPUs), so compute alone would call it the environment's.
//
// Per communicator, its transfer time per iteration (CommIterationSummary.transfer_ns, the
// slowest reporting member's; NaN or <= 0: missing) over the stretch before a change and the
// stretch after it. A communicator's factor is its median after over its median before (at
// least 2 values on each side). It *stands out* when its factor is at least 1 + 2θ, exceeds
// the median factor of the other measured communicators by more than 1 + 20θ (measured under
// load: healthy runs up to 1.85x, link caps 5.6x and more), and its transfers grew by at least 1 /
// kMaxAmplification of the series' rise (a link that explains the slowdown: a communicator of small
// transfers may double under load while adding little to the iteration); at least 3 communicators
// must be measured.
struct CommStretches {
  std::vector<uint64_t> comm_ids;
  std::vector<std::vector<double>> before;  // One per comm_ids entry.
  std::vector<std::vector<double>> after;
};

struct CommStandout {
  bool stands_out = false;
  uint64_t comm_id = 0;  // The communicator whose factor exceeds the others' most; 0 none.
  double factor = 0;     // Its factor.
  double others = 0;     // The median factor of the other measured communicators.
  double rise = 0;       // Its median after - median before (the transfer times' unit).
  int measured = 0;      // Communicators with a factor.
};

// `series_rise`: the series' rise (mean after - mean before) in the transfer times' unit.
// kInvalidArgument: comm_ids, before and after differ in size, theta out of (0, 10], or a
// series_rise that is not finite.
absl::StatusOr<CommStandout> FindCommStandout(const CommStretches& comms, double theta,
                                              double series_rise);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_ENVIRONMENT_SHIFT_H_
