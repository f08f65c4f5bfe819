// Edge reduction for the ranks of one job on this node: op records and iteration hints in,
// IterationSummary (common.proto) out, one per rank and iteration, in iteration order per rank.
//
// For each iteration of a rank (RankReducer) and each communicator it used, the summary holds
// op_count, bytes, busy_ns (sum of host durations) and the split into wait_ns and transfer_ns:
//   * profiled ops (device_duration_ns > 0): wait = host duration - device time;
//   * ops whose participants are all on this node: wait = latest participant start - own start
//     (InstanceTable), so the rank that arrives last waits ~0 and the others wait for it;
//   * otherwise wait = 0 (transfer = busy): nothing local tells them apart.
// Each part is clamped to [0, duration]. compute_ns = iteration time - the union of op intervals
// inside the iteration, clamped to [0, iteration time]. An iteration whose matches are still
// missing waits up to `match_hold` for the other participants' ops before the fallback is used.
//
// Not thread-safe (the agent serializes calls per job).
#ifndef FALCON_AGENT_REDUCE_JOB_REDUCER_H_
#define FALCON_AGENT_REDUCE_JOB_REDUCER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/reduce/held_op.h"
#include "agent/reduce/instance_table.h"
#include "agent/reduce/rank_reducer.h"
#include "google/protobuf/repeated_field.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/shim.pb.h"

namespace falcon::agent::reduce {

class JobReducer {
 public:
  struct Options {
    RankReducer::Options rank;
    absl::Duration match_hold = absl::Seconds(2);     // Wait for other participants' ops.
    absl::Duration instance_ttl = absl::Seconds(30);  // Forget unmatched instances after this.
  };

  struct Stats {
    uint64_t summaries = 0;         // Emitted.
    uint64_t matched_ops = 0;       // Wait from the spread of start times.
    uint64_t device_ops = 0;        // Wait from device time.
    uint64_t unmatched_ops = 0;     // Wait taken as 0.
    uint64_t unassigned_ops = 0;    // Dropped by the rank reducers (sum).
    uint64_t overflow_ops = 0;      // Dropped by the rank reducers for memory (sum).
    uint64_t stale_iterations = 0;  // Not above the rank's last emitted iteration; dropped.
    size_t held_ops = 0;            // Held now (sum over ranks).
    size_t instances = 0;           // Instance table entries now.
  };

  // kInvalidArgument when the options are invalid.
  static absl::Status Validate(const Options& options);
  // REQUIRES: Validate(options).ok().
  explicit JobReducer(Options options);

  // `rank` runs on this node. Creates its reducer when new.
  void AddRank(uint32_t rank);
  // `rank` restarted (new process): iterations the old process hinted are complete (summarized
  // at the next Flush); then a fresh reducer and op instance counters. Iteration numbering found
  // without hints continues; `new_epoch` also forgets the last emitted iteration.
  void ResetRank(uint32_t rank, bool new_epoch, int64_t now_ns);
  // `rank` resumes after `iteration`, which an earlier agent already delivered (ShimHello
  // .delivered_iteration): iterations at or below it are stale (dropped, counted), and numbering
  // without hints continues after it. REQUIRES: AddRank(rank) was called.
  void ContinueAfter(uint32_t rank, int64_t iteration);
  // Registers or replaces a communicator (already validated).
  void AddCommunicator(const v1::Communicator& comm);

  // Adds validated ops of a rank added with AddRank. `now_ns`: agent monotonic time.
  void AddOps(uint32_t rank, const google::protobuf::RepeatedPtrField<v1::OpRecord>& ops,
              int64_t now_ns);
  void AddHint(uint32_t rank, const v1::IterationHint& hint, int64_t now_ns);
  void SetPlanVersion(uint32_t rank, int64_t plan_version);

  // Appends the summaries of iterations complete by `now_ns`. `drain`: every hinted iteration
  // counts as complete and nothing waits for matches (shutdown).
  void Flush(int64_t now_ns, bool drain, std::vector<v1::IterationSummary>* out);

  Stats stats() const;
  bool HasRank(uint32_t rank) const { return (ranks_.count(rank) > 0); }
  // The reducer of `rank`, or nullptr.
  const RankReducer* rank_reducer(uint32_t rank) const;

 private:
  struct RankState {
    std::unique_ptr<RankReducer> reducer;
    std::deque<IterationDraft> pending;  // Complete, waiting for matches.
    absl::flat_hash_map<uint64_t, uint64_t> collective_count;
    absl::flat_hash_map<std::tuple<uint64_t, uint32_t, uint32_t>, uint64_t> p2p_count;
    int64_t last_emitted = -1;
  };
  struct CommInfo {
    v1::CommKind kind = v1::COMM_KIND_UNKNOWN;
    std::vector<uint32_t> members;
  };

  std::unique_ptr<RankReducer> NewReducer(uint32_t rank) const;
  bool ReadyToSummarize(const IterationDraft& d) const;
  v1::IterationSummary Summarize(uint32_t rank, const IterationDraft& d);

  const Options options_;
  std::map<uint32_t, RankState> ranks_;  // Ordered: deterministic output.
  absl::flat_hash_map<uint64_t, CommInfo> comms_;
  InstanceTable instances_;
  Stats stats_;
  uint64_t retired_unassigned_ = 0;  // From reducers replaced by ResetRank.
  uint64_t retired_overflow_ = 0;
};

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_JOB_REDUCER_H_
