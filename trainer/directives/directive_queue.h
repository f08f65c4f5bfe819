// Directive bookkeeping on one rank: directives agreed at a boundary wait here until their
// effective iteration; each id is applied at most once and its outcome remembered, so a
// directive this rank's hooks deliver again is acknowledged again but never re-applied (the
// first delivery of an id the rank already applied from another rank's copy is not acknowledged
// again: it was, when applied). CheckDirective validates a
// due directive against the trainer's current plan (docs/architecture.md#directives; common.proto).
//
// What the trainer accepts (anything else is REJECTED with the reason):
//   micro_batch_plan   one count per DP group, each >= 0 and a multiple of PP, summing to M.
//   layer_split        (S2L) common::ValidateLayerSplit against the current D x P, the model's
//                      blocks and M: per DP group P stage block counts, each >= 1, summing to the
//                      blocks; per DP group one micro-batch count >= 1 (any, not a multiple of
//                      PP), summing to M.
//   topology_change    one assignment per rank forming a full D' x P' grid (D' * P' = world,
//                      tp_index 0), M a multiple of P', P' <= number of blocks. D' != D resets the
//                      micro-batch plan to the even split; a new shape resets the layer split.
//   checkpoint_restart a non-empty checkpoint_dir; excluded_ranks distinct, in the world, and
//                      leaving at least PP ranks.
//   pause              max_duration_ns in (0, 600e9]; resume: only while paused.
//   profiling          not the trainer's (the shim's): ignored, never acked.
//
// Thread-compatible.
#ifndef FALCON_TRAINER_DIRECTIVES_DIRECTIVE_QUEUE_H_
#define FALCON_TRAINER_DIRECTIVES_DIRECTIVE_QUEUE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/plan/layout.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer::directives {

// The layout an S3 TopologyChange describes for `world` ranks: one assignment per rank, the
// (dp, pp) indices filling a full D' x P' grid with D' * P' == world, tp_index 0 (the reference
// trainer has no tensor parallelism); no nodes (see analysis/plan/layout.h). kInvalidArgument
// naming the offending assignment.
absl::StatusOr<analysis::plan::Layout> LayoutFromTopologyChange(
    const falcon::v1::TopologyChange& change, int world);

// The state directives are checked against.
struct PlanState {
  const analysis::plan::Layout* layout = nullptr;
  const std::vector<int>* micro_batches = nullptr;
  int total_micro_batches = 1;
  int num_blocks = 1;
  bool paused = false;
};

// kInvalidArgument (malformed or infeasible for this job) or kFailedPrecondition (resume while
// not paused) with a reason naming the field.
absl::Status CheckDirective(const falcon::v1::Directive& directive, const PlanState& state);

// Whether the trainer handles this kind (profiling is the shim's).
bool IsTrainerDirective(const falcon::v1::Directive& directive);

// Whether `rank` must acknowledge `directive` (empty target_ranks = every rank).
bool IsTarget(const falcon::v1::Directive& directive, int rank);

struct DirectiveOutcome {
  falcon::v1::AckStatus status = falcon::v1::ACK_STATUS_UNSPECIFIED;
  std::string reason;
  int64_t applied_iteration = -1;
};

class DirectiveQueue {
 public:
  // Queues agreed directives not seen before (trainer kinds only). Returns the ones newly queued
  // (the caller acks RECEIVED for those due later).
  std::vector<falcon::v1::Directive> Add(const std::vector<falcon::v1::Directive>& agreed);
  // Removes and returns the queued directives with effective_iteration <= iteration, by id.
  std::vector<falcon::v1::Directive> PopDue(int64_t iteration);
  // Remembers the final outcome of an id.
  void Record(uint64_t id, DirectiveOutcome outcome);
  // The final outcome of `id`, or nullptr while pending or unknown.
  const DirectiveOutcome* OutcomeOf(uint64_t id) const;
  bool Known(uint64_t id) const { return pending_.count(id) > 0 || done_.count(id) > 0; }
  // Notes that this rank's hooks delivered `id`; true the first time, false for a re-delivery.
  bool MarkDelivered(uint64_t id) { return delivered_.insert(id).second; }
  size_t pending() const { return pending_.size(); }

 private:
  std::map<uint64_t, falcon::v1::Directive> pending_;
  std::map<uint64_t, DirectiveOutcome> done_;
  std::set<uint64_t> delivered_;  // Ids this rank's hooks returned.
};

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_DIRECTIVE_QUEUE_H_
