// Iteration period from the autocorrelation of the op stream
// (docs/algorithms.md#iteration-period-acf).
//
// Each op is a symbol (its kind and communicator, e.g. OpSymbol(kind, comm_id)); training repeats
// the same symbol sequence every iteration. The period is the first lag k whose autocorrelation
// reaches M = 0.95:
//   ACF_k = [1/(L-k) sum_t <X_t - mu, X_{t+k} - mu>] / [1/L sum_t |X_t - mu|^2]
// with X_t the one-hot vector of op t and mu the symbol frequencies: the paper's formula with a
// categorical embedding (so no numeric coding of symbols can create false matches) and each sum
// averaged over its own terms (so a clean periodic stream scores exactly 1 at its period).
//
// Robustness:
// - Stray ops: a symbol seen fewer than max(2, L / (2 max_lag)) times cannot recur every
//   iteration (a period is at most max_lag ops) and is ignored.
// - Ops that occur only every k iterations (logging, checkpoints): a symbol seen fewer than
//   rare_ratio times the (lower) median count of the remaining symbols is ignored. This assumes,
//   as in real jobs, that at least half of the distinct symbols occur about once per iteration or
//   more; callers can also name symbols to ignore.
// - A period change: FindPeriod looks at the last `window` ops only; IterationTracker re-runs it.
//
// Iteration boundaries are the occurrences of an anchor: the kept symbol with the fewest
// occurrences per period (first seen on ties); if it occurs m > 1 times per period, every m-th.
// Iteration time = time between an anchor op and the same op one period later.
#ifndef FALCON_ANALYSIS_DETECT_PERIOD_FINDER_H_
#define FALCON_ANALYSIS_DETECT_PERIOD_FINDER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

// One op of one rank's stream.
struct OpEvent {
  uint64_t symbol = 0;       // Equal for the same op of different iterations.
  int64_t timestamp_ns = 0;  // When it started (host monotonic); non-decreasing along the stream.
};

// A symbol from an op kind (proto OpKind) and a communicator id; the same in every process.
uint64_t OpSymbol(int op_kind, uint64_t comm_id);

struct PeriodOptions {
  int max_lag = 256;        // Longest period considered, in kept ops. [1, 100000].
  int window = 4096;        // Only the last `window` ops are analysed. [2, 10000000].
  double threshold = 0.95;  // M: the first lag whose ACF reaches this is the period. (0, 1].
  // See the header comment. [0, 1]; 0 keeps every non-stray symbol. 0.4 drops ops that occur
  // every 3rd iteration or less often, and keeps those at half the median (an op once per
  // iteration among ops twice per iteration).
  double rare_ratio = 0.4;
  std::vector<uint64_t> ignore_symbols;  // Never part of the period.

  absl::Status Validate() const;
};

struct PeriodResult {
  int period = 0;                   // Kept ops per iteration.
  double acf = 0.0;                 // ACF at the period.
  int64_t offset = 0;               // Input index of the first iteration boundary in the window.
  uint64_t anchor = 0;              // Symbol that marks iteration boundaries.
  int anchor_per_period = 1;        // Anchor occurrences per iteration.
  std::vector<int64_t> boundaries;  // Input indices of the boundary ops, ascending.
  std::vector<absl::Duration> iteration_times;  // Between consecutive boundaries.
  std::vector<uint64_t> ignored_symbols;        // Stray, rare or listed symbols seen in the window.
  double ops_per_iteration = 0.0;               // All ops in the window / iterations spanned.
};

// kInvalidArgument: bad options, or timestamps that go backwards (named by index).
// kFailedPrecondition: fewer than 2 kept ops. kNotFound: no lag up to max_lag (and at most half
// the kept ops) reaches the threshold.
absl::StatusOr<PeriodResult> FindPeriod(absl::Span<const OpEvent> ops,
                                        const PeriodOptions& options);

// Streaming: feed a rank's ops one at a time, get iteration times as iterations complete.
// - The period is (re)detected over the last `window` ops every `redetect_every` ops. A new
//   period is adopted only when the most recent half of the window agrees, so a window that
//   straddles a change (where a common multiple of both periods can score best) is not used.
// - An iteration is reported only when the ops between its boundaries fit the period
//   (period <= non-ignored ops <= period + max(2, period / 8), allowing for stray ops). Three
//   misfits in a row mean the pattern changed: the period is dropped and the ops seen so far are
//   forgotten, so the next detection sees only the new pattern (after `redetect_every` ops).
// Not thread-safe.
class IterationTracker {
 public:
  struct Options {
    PeriodOptions period;
    int redetect_every = 1024;  // [1, 10000000].
  };
  // kInvalidArgument for bad options.
  static absl::StatusOr<IterationTracker> Create(const Options& options);

  // Returns the iteration time when `op` closes an iteration. kInvalidArgument when its
  // timestamp is before the previous op's (state unchanged).
  absl::StatusOr<std::optional<absl::Duration>> Add(const OpEvent& op);

  // The period in force (kept ops per iteration), if any.
  std::optional<int> period() const;
  uint64_t anchor() const { return anchor_; }
  int64_t ops_seen() const { return seen_; }

 private:
  explicit IterationTracker(const Options& options);
  void Redetect();

  void Forget();

  Options options_;
  std::deque<OpEvent> recent_;  // Last `window` ops (since the last Forget()).
  std::vector<OpEvent> scratch_;
  int misfits_ = 0;  // Consecutive iterations that did not fit the period.
  int64_t seen_ = 0;
  int64_t last_ts_ = 0;
  int period_ = 0;  // 0: none yet.
  uint64_t anchor_ = 0;
  int anchor_per_period_ = 1;
  int64_t anchor_seen_ = 0;  // Anchor occurrences since the period was adopted.
  std::optional<int64_t> last_boundary_ns_;
  absl::flat_hash_set<uint64_t> ignored_;
  int64_t kept_since_boundary_ = 0;
};

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_PERIOD_FINDER_H_
