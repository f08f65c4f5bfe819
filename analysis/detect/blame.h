// Cross-rank blame for one iteration (docs/algorithms.md#cross-rank-blame): which rank makes the
// others wait.
//
// In synchronous training one slow rank slows everyone: its peers sit in collectives and
// point-to-point receives waiting for it, so their communication time grows while the slow rank
// itself waits least. So:
// - Compute: a rank is slow when its compute time exceeds (1 + slow_ratio) x the median of its
//   comparable ranks (same `group`, e.g. the same pipeline stage).
// - Communication: a communicator's transfer time is the smallest time any member spent in it
//   (the last member to arrive waits for nobody; where the agent measured transfer time apart
//   from waiting, that is used instead). Comparable communicators (same kind and bytes, e.g. the
//   DP all-reduce groups of all stages) are flagged "suspicious" above (1 + slow_ratio) x their
//   median (the paper's 10%, proto Settings.suspicious_group_ratio).
// - Blame goes to ranks whose own compute is slow, or to the members of a suspicious
//   communicator that sit in the most suspicious communicators (a rank with a slow link slows
//   every group it is in; for a lone slow group, all its members). Waiting ranks are never
//   blamed: their wait is not transfer.
// - A suspicious communicator with a member blamed for compute by at least the communicator's
//   own excess is explained by that compute: in a pipeline every member of a slow rank's
//   point-to-point communicator waits for it (the stage after it for its activations, the rank
//   itself for gradients that the delayed stage sends late), and without device timing that wait
//   reads as transfer. It stays listed (explained_by_rank) but blames nobody for communication;
//   a real link fault on that communicator whose excess the compute fault outweighs is left to
//   a later event once the compute culprit is mitigated. Blame needs the excess over the median
//   to be at least
//   min_excess_fraction of the iteration time, so that tiny ops with large relative jitter
//   (a 3 ms all-reduce taking 5 ms) do not point at anyone.
#ifndef FALCON_ANALYSIS_DETECT_BLAME_H_
#define FALCON_ANALYSIS_DETECT_BLAME_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::analysis::detect {

struct RankCompute {
  int64_t rank = 0;        // Global rank; unique in a BlameInput.
  int64_t group = 0;       // Ranks with equal work share a group (e.g. the PP stage).
  absl::Duration compute;  // Time outside communication this iteration, >= 0.
};

struct CommMember {
  int64_t rank = 0;
  absl::Duration busy;  // Time in this communicator's ops (transfer + waiting), >= 0.
  // Transfer part when measured; negative when unknown (then busy is used).
  absl::Duration transfer = absl::Nanoseconds(-1);
};

struct CommTiming {
  uint64_t comm_id = 0;  // Unique in a BlameInput.
  std::string kind;      // Comparable communicators share kind and bytes.
  int64_t bytes = 0;
  std::vector<CommMember> members;  // Non-empty, distinct ranks.
};

struct BlameInput {
  int64_t step = 0;
  // The iteration time; zero: the median over ranks of compute + communication busy time.
  absl::Duration iteration_time;
  std::vector<RankCompute> ranks;
  std::vector<CommTiming> comms;
};

struct BlameOptions {
  double slow_ratio = 0.10;  // (0, 10].
  // [0, 1]. Half the 10% verification threshold: a culprit must explain a material part of the
  // slowdown (at 0.02, a 2 s embedding all-reduce in one 46 s ByteDance AR step gets blamed).
  double min_excess_fraction = 0.05;
  absl::Status Validate() const;
};

enum class BlameCause { kCompute, kCommunication };
absl::string_view BlameCauseName(BlameCause cause);  // "compute", "communication"

struct SuspiciousComm {
  uint64_t comm_id = 0;
  absl::Duration transfer;
  double ratio = 0;  // transfer / median of comparable communicators.
  // A member whose compute excess is at least this communicator's excess (see above): the
  // slowdown is that rank's compute seen from its peers' waits. -1: unexplained.
  int64_t explained_by_rank = -1;
  // Excess over the median of at least min_excess_fraction of the iteration time: large enough
  // to explain a slowdown of the job (a smaller one is jitter of a small op).
  bool material = false;
};

struct Blame {
  int64_t rank = 0;
  BlameCause cause = BlameCause::kCompute;
  double ratio = 0;       // Own compute (or the comm's transfer) / the comparable median.
  absl::Duration excess;  // Above the median.
  uint64_t comm_id = 0;   // The communicator, for kCommunication.
};

struct BlameResult {
  int64_t step = 0;
  absl::Duration iteration_time;
  std::vector<SuspiciousComm> suspicious;  // By comm_id.
  std::vector<Blame> blamed;               // By rank, then cause.
};

// kInvalidArgument naming the rank or communicator: negative time, duplicate rank or comm id,
// a communicator without members or with a repeated member; or bad options.
absl::StatusOr<BlameResult> BlameStep(const BlameInput& input, const BlameOptions& options);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_BLAME_H_
