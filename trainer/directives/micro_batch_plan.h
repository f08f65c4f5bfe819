// The S2 micro-batch plan of the reference trainer: how the M micro-batches of a global batch are
// split across the D DP groups of a DP x PP layout (analysis/plan/layout.h), and the job
// configuration checks it rests on. Under 1F1B every DP group runs a multiple of PP micro-batches
// (docs/algorithms.md#s2-micro-batch-solver).
#ifndef FALCON_TRAINER_DIRECTIVES_MICRO_BATCH_PLAN_H_
#define FALCON_TRAINER_DIRECTIVES_MICRO_BATCH_PLAN_H_

#include <vector>

#include "absl/status/status.h"

namespace falcon::trainer::directives {

// Checks a job configuration before any rank starts: dp, pp >= 1, dp * pp == world,
// micro-batches >= pp and a multiple of pp (1F1B: every DP group gets a multiple of PP),
// pp <= num_blocks (every stage holds at least one block). kInvalidArgument naming the flag.
absl::Status ValidateParallelConfig(int world, int dp, int pp, int micro_batches, int num_blocks);

// The even split of `micro-batches` (a multiple of pp) over `dp` groups in chunks of pp: every
// group gets floor(chunks / dp) chunks and the first chunks % dp groups one more.
std::vector<int> EvenMicroBatchPlan(int dp, int pp, int micro_batches);

// Checks an S2 plan: one entry per DP group, each >= 0 and a multiple of pp, summing to
// `micro-batches`. kInvalidArgument naming the entry.
absl::Status ValidateMicroBatchPlan(const std::vector<int>& plan, int dp, int pp,
                                    int micro_batches);

// Index of the first global micro-batch of DP group `dp` under `plan` (sum of earlier entries):
// group d runs global micro-batches [offset, offset + plan[d]).
int MicroBatchOffset(const std::vector<int>& plan, int dp);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_MICRO_BATCH_PLAN_H_
