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
#include "analysis/detect/peer_links.h"
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

  // Starts a new profile (drops everything collected) from `first_iteration`: the iteration
  // after the newest any rank had reported when profiling began. Earlier iterations are neither
  // collected nor judged (some rank's summary of them came before Start: they would be
  // incomplete), so how far the job's ranks are apart when it starts does not eat into the
  // iterations the profile may take (docs/fleet.md: thousands of agents drift apart by seconds).
  void Start(int64_t first_iteration = 0);
  int64_t first_iteration() const { return first_iteration_; }
  void Stop() { active_ = false; }
  bool active() const { return active_; }

  // Adds a summary (validated against `job`). Group of the rank: its PP stage when known.
  void AddSummary(const falcon::v1::IterationSummary& summary, const registry::JobEntry& job);
  // Adds raw ops of `rank`; ops with iteration >= 0 and device time > 0 set the transfer time of
  // (iteration, comm, rank) to the sum of their device durations. Peer transfers (PEER_SEND from
  // `rank` to its peer, PEER_RECV from the peer to `rank`) are added to their link's totals
  // instead (bytes, and device_duration_ns as busy time), grouped by the comm's role in `job`;
  // those of unknown comms or peers are ignored.
  void AddOps(uint32_t rank, const google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>& ops,
              const registry::JobEntry& job);
  // Judges `iteration` (complete for the job) and forgets its data. An iteration without the
  // summaries of all `expected_ranks` is forgotten unjudged (counted in incomplete()): a rank
  // whose summary came before Start() (profiling began while the iteration was being reported)
  // or never came has no compute time, and its communicators would hold only the peers' waits,
  // which read as slow transfers (a slow rank's pipeline peer blamed for its link).
  void CompleteIteration(int64_t iteration, int64_t job_iteration_time_ns, size_t expected_ranks,
                         const analysis::detect::BlameOptions& options);
  // Iterations judged, and iterations forgotten as incomplete, since Start().
  int judged() const { return judged_; }
  int incomplete() const { return incomplete_; }

  ProfileResult Result() const;
  // The links ranked by their peer transfers so far (docs/algorithms.md#peer-timing); empty
  // without peer transfers (no NCCL profiler plugin in the job).
  analysis::detect::PeerLinkRanking PeerLinks(
      const analysis::detect::PeerLinkOptions& options) const;
  bool has_peer_transfers() const { return !peer_links_.empty(); }
  // Peer transfers of links beyond the profile's bound on tracked links (65,536), not counted.
  uint64_t untracked_peer_transfers() const { return untracked_peer_transfers_; }
  size_t pending_iterations() const { return pending_.size(); }

 private:
  struct PendingComm {
    std::string kind;
    int64_t bytes = 0;
    std::map<uint32_t, analysis::detect::CommMember> members;
    // Device time from raw ops per rank, summed over the batches they came in.
    std::map<uint32_t, int64_t> device_ns;
  };
  struct PendingIteration {
    std::vector<analysis::detect::RankCompute> ranks;
    std::map<uint64_t, PendingComm> comms;
  };
  PendingIteration& Pending(int64_t iteration);
  void AddPeerTransfer(uint32_t rank, const falcon::v1::OpRecord& op,
                       const registry::JobEntry& job);

  size_t max_pending_;
  bool active_ = false;
  int64_t first_iteration_ = 0;
  std::map<int64_t, PendingIteration> pending_;
  int judged_ = 0;
  int incomplete_ = 0;
  std::map<uint64_t, std::vector<double>> comm_ratios_;  // One entry per flagged iteration.
  std::map<uint32_t, std::vector<analysis::detect::Blame>> blames_;  // Likewise per rank.
  std::map<analysis::detect::PeerLinkKey, analysis::detect::PeerLinkTotals> peer_links_;
  uint64_t untracked_peer_transfers_ = 0;
};

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_COMM_PROFILER_H_
