// The compute probe of a compute fail-slow: the culprit's compute time per micro-batch and block
// ((IterationSummary.compute_ns - the stage's fixed cost) / (the micro-batches of its DP group x
// the blocks its stage holds under the layer split in force)) against its pipeline-stage peers'
// (the non-culprit ranks of the same stage), over the last kWindow summaries of each rank.
//  - Per block: after an S2L re-split the culprit's stage holds fewer blocks than its peers' (in
//    the other DP groups); per micro-batch alone the lighter culprit would read as recovered
//    (and the plan be reverted) or be sized too light. Without known blocks (pipeline_blocks 0)
//    a stage counts as one block. A unit below is one micro-batch through one block.
//  - The fixed cost: a rank's compute per iteration is F + u x c (u units of c each, F per
//    iteration: the optimizer step, loss bookkeeping). Divided by m alone, a group S2 gave
//    fewer micro-batches reads slower per micro-batch than its peers with more even when healthy
//    (seen in the PyTorch e2e job: plan [24, 8], F about 1.3 micro-batches: x1.06-1.25 for 40
//    iterations after the fault ended, so the event stayed MITIGATING). F is fitted per stage
//    (least squares of compute on u) from the stage peers' recent medians at each unit count
//    they ran (before the plan and under it), once per round of the peers' summaries
//    (about once per iteration; O(peers) each); a fit is sound with
//    two counts or more, a positive slope and F in (0, kMaxFixedShare of the smallest compute]
//    (an optimizer step is a few percent of an iteration; a larger F is the fit taking load
//    from outside the job for a fixed cost, and could hide a culprit still x1.3 slow). The probe
//    uses the median of the stage's last kFits sound fits (0 before the first). Load from
//    outside the job between the two periods moves a fit (more load under the plan drives it
//    below 0, unsound; less makes it larger): the median over many steadies it.
//  - Before S2 it measures the culprit's stage slowdown, which the S2 plan uses
//    (Culprit::measured_stage_slowdown).
//  - It tells when the fault cleared: once the culprit was seen slow (ratio >= 1 + min_ratio, or
//    SeenSlow) and then stays below 1 + min_ratio / 2 for `clear_iterations` summaries in a row.
//    Under S2 the job's iteration time hides the fault (the slow group runs fewer
//    micro-batches); before S2 outside load can hold it up after the fault cleared.
// See docs/algorithms.md#strategies. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_MITIGATION_COMPUTE_PROBE_H_
#define FALCON_CONTROLLER_MITIGATION_COMPUTE_PROBE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "analysis/plan/layout.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::mitigation {

class ComputeProbe {
 public:
  // Samples kept per rank.
  static constexpr size_t kWindow = 5;

  // `culprits`: the compute culprit ranks; `clear_iterations` >= 1.
  ComputeProbe(std::vector<uint32_t> culprits, int clear_iterations);

  // The ranks' (dp, pp) from the job's layout, the even split (micro-batches per DP index) used
  // when the job has no plan of the right size, and the pipeline's blocks (0 unknown: a stage is
  // one block). Samples need a layout.
  bool has_layout() const { return !rank_dp_.empty(); }
  void SetLayout(const analysis::plan::Layout& layout, std::vector<uint32_t> even_split,
                 int pipeline_blocks = 0);

  bool IsCulprit(uint32_t rank) const;

  // One summary of `rank`: compute_ns over its DP group's micro-batches in `micro_batches` (the
  // plan in force; the even split when its size differs) times the blocks its stage holds under
  // `layer_split` (the split in force, per DP index; even when empty or not of the layout's
  // shape). False when it cannot be attributed (no layout, rank or DP index out of range, or a
  // group with 0 micro-batches).
  bool Add(uint32_t rank, int64_t compute_ns, const std::vector<uint32_t>& micro_batches,
           const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split = {});
  // The blocks (dp, pp) holds under `layer_split` (as Add), >= 1.
  uint32_t BlocksHeld(
      int dp, int pp,
      const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) const;

  // The median compute per unit (micro-batch and block) of `rank` over the median of its stage
  // peers' medians, both less the stage's fixed cost; 0 when `rank` has fewer than `min_samples`
  // samples or no peer has 3.
  double Ratio(uint32_t rank, size_t min_samples) const;
  // The fixed cost per iteration (ns) of `rank`'s stage: the median of its last sound fits; 0
  // before the first (see the top of this file).
  double FixedCostNs(uint32_t rank) const;
  // The worst culprit's Ratio (0 when none measured).
  double WorstCulpritRatio(size_t min_samples) const;
  // The compute per unit of the culprits' stage peers (the ranks of a culprit's stage that
  // are no culprit; other stages may count waiting for the slow stage as compute): the median
  // over them of each one's median (ns; 0 when none has a sample). Its change across a plan is
  // load from outside the job, which the plan does not cause (PlanMeasurement::Judge). Any one
  // sample counts: a plan may be issued an iteration after the verdict, and the median over the
  // ranks steadies it. The fixed cost is not taken out here: fitted from the same two periods,
  // it would explain away any change between them.
  double PeerLevel() const;

  enum class State {
    kTooFew,    // Not enough samples for a ratio.
    kSlow,      // At or above 1 + min_ratio: the fault is there.
    kNotClear,  // Not seen slow yet, or between the thresholds.
    kClearing,  // Below 1 + min_ratio / 2, fewer than clear_iterations times in a row.
    kCleared,   // ... clear_iterations times in a row after it was seen slow.
  };
  struct Reading {
    State state = State::kTooFew;
    double ratio = 0;
    int streak = 0;
  };
  // Judges the latest sample of culprit `rank` (Ratio over kWindow samples).
  Reading Observe(uint32_t rank, double min_ratio);

  // The culprit was measured slow elsewhere (the verdict's ratio at or above 1 + min_ratio): a
  // clearing counts from now on, as after a kSlow reading.
  void SeenSlow() { saw_slow_ = true; }

  // Drops the samples (a plan took effect: the probe starts over under it). The history the
  // fixed cost is fitted from stays.
  void ClearSamples() { samples_.clear(); }

 private:
  std::vector<uint32_t> culprits_;
  int clear_iterations_;
  // Unit counts kept in a rank's history (the most recently seen).
  static constexpr size_t kHistoryCounts = 4;
  // Sound fixed-cost fits kept per stage.
  static constexpr size_t kFits = 16;
  // The largest fixed cost a sound fit may give, as a share of the stage's smallest compute.
  static constexpr double kMaxFixedShare = 0.15;
  struct Sample {
    uint32_t units = 0;  // Micro-batches x blocks held.
    double compute_ns = 0;
  };
  struct CountHistory {
    std::vector<double> compute_ns;  // The last kWindow, oldest first.
    double median = 0;               // Of compute_ns.
    uint64_t last_seen = 0;          // Add's sequence number.
  };
  // A fit of the stage's fixed cost from the history of `rank`'s stage peers (least squares of
  // compute on units); 0 when unsound.
  double FitFixedCost(uint32_t rank) const;
  // The non-culprit ranks of stage `pp` (at least 1; counted by SetLayout).
  size_t StagePeers(int pp) const;
  // (compute - fixed) / units, over a rank's samples.
  double PerUnit(const std::vector<Sample>& samples, double fixed_ns) const;

  std::map<uint32_t, std::vector<Sample>> samples_;               // Oldest first.
  std::map<uint32_t, std::map<uint32_t, CountHistory>> history_;  // Rank -> units -> compute.
  uint64_t sequence_ = 0;
  std::map<int, std::vector<double>> fits_;  // Stage -> its last kFits sound fits, oldest first.
  std::map<int, size_t> adds_since_fit_;     // Stage -> its peers' summaries since its last fit.
  std::map<int, size_t> stage_peers_;        // Stage -> its non-culprit ranks.
  std::vector<int> rank_dp_, rank_pp_;
  int dp_size_ = 0, pp_size_ = 0;
  std::vector<uint32_t> even_split_;
  std::vector<uint32_t> even_blocks_;  // Per stage under the even split (empty: unknown).
  bool saw_slow_ = false;
  int clear_streak_ = 0;
};

}  // namespace falcon::controller::mitigation

#endif  // FALCON_CONTROLLER_MITIGATION_COMPUTE_PROBE_H_
