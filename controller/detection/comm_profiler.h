// The profiling phase's data (docs/algorithms.md#profiling): per profiled iteration, every rank's
// compute time and every communicator's per-member busy and transfer time (from the summaries,
// refined by device-timed raw op records when the ops carry their iteration), judged by the
// analysis cross-rank blame (analysis/detect/blame.h): comparable communicators (same kind and
// bytes) above the median by the suspicious-group ratio, and ranks whose own compute or transfer is
// slow. Aggregated over the profiled iterations: a comm or rank counts when flagged in at least
// half of them. Not thread-safe.
#ifndef FALCON_CONTROLLER_DETECTION_COMM_PROFILER_H_
#define FALCON_CONTROLLER_DETECTION_COMM_PROFILER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/detect/blame.h"
#include "controller/registry/job_registry.h"
#include "google/protobuf/repeated_field.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::detection {

struct ProfileResult {
  int iterations = 0;  // Profiled (complete) iterations judged.
  struct Comm {
    uint64_t comm_id = 0;
    double ratio = 0;     // Median over flagged iterations of transfer / comparable median.
    double fraction = 0;  // Share of profiled iterations in which it was suspicious.
  };
  struct Rank {
    uint32_t rank = 0;
    analysis::detect::BlameCause cause = analysis::detect::BlameCause::kCompute;
    double ratio = 0;
    double fraction = 0;        // Share of profiled iterations that blamed the rank (any cause).
    double cause_fraction = 0;  // Share of profiled iterations that blamed it for `cause`.
    uint64_t comm_id = 0;       // For kCommunication.
  };
  // By comm_id; fraction >= 0.5. Only communicators whose excess is material and not explained
  // by a member's slow compute (analysis/detect/blame.h) count.
  std::vector<Comm> suspicious;
  std::vector<Rank> blamed;  // By rank; fraction >= 0.5.
};

class CommProfiler {
 public:
  explicit CommProfiler(size_t max_pending_iterations = 64)
      : max_pending_(max_pending_iterations) {}

  // Starts a new profile (drops everything collected).
  void Start();
  void Stop() { active_ = false; }
  bool active() const { return active_; }

  // Adds a summary (validated against `job`). Group of the rank: its PP stage when known.
  void AddSummary(const falcon::v1::IterationSummary& summary, const registry::JobEntry& job);
  // Adds raw ops of `rank`; ops with iteration >= 0 and device time > 0 set the transfer time of
  // (iteration, comm, rank) to the sum of their device durations.
  void AddOps(uint32_t rank, const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops);
  // Judges `iteration` (complete for the job) and forgets its data.
  void CompleteIteration(int64_t iteration, int64_t job_iteration_time_ns,
                         const analysis::detect::BlameOptions& options);

  ProfileResult Result() const;
  size_t pending_iterations() const { return pending_.size(); }

 private:
  struct PendingComm {
    std::string kind;
    int64_t bytes = 0;
    std::map<uint32_t, analysis::detect::CommMember> members;
  };
  struct PendingIteration {
    std::vector<analysis::detect::RankCompute> ranks;
    std::map<uint64_t, PendingComm> comms;
  };
  PendingIteration& Pending(int64_t iteration);

  size_t max_pending_;
  bool active_ = false;
  std::map<int64_t, PendingIteration> pending_;
  int judged_ = 0;
  std::map<uint64_t, std::vector<double>> comm_ratios_;  // One entry per flagged iteration.
  std::map<uint32_t, std::vector<analysis::detect::Blame>> blames_;  // Likewise per rank.
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_COMM_PROFILER_H_
