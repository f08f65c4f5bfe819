#include "trainer/directives/micro_batch_plan.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace falcon::trainer::directives {

absl::Status ValidateParallelConfig(int world, int dp, int pp, int micro_batches, int num_blocks) {
  if (dp < 1) return absl::InvalidArgumentError(absl::StrCat("--dp ", dp, " must be >= 1"));
  if (pp < 1) return absl::InvalidArgumentError(absl::StrCat("--pp ", pp, " must be >= 1"));
  if (world != dp * pp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout --dp ", dp, " x --pp ", pp, " = ", dp * pp, " ranks ",
        world % (dp * pp) != 0 ? "does not divide" : "does not match", " the world size ", world));
  }
  if (micro_batches < pp || micro_batches % pp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro-batches ", micro_batches, " is not a positive multiple of --pp ", pp,
                     " (under 1F1B every DP group runs a multiple of PP micro-batches)"));
  }
  if (pp > num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("--pp ", pp, " exceeds --layers ", num_blocks,
                                                   ": every pipeline stage needs a block"));
  }
  return absl::OkStatus();
}

std::vector<int> EvenMicroBatchPlan(int dp, int pp, int micro_batches) {
  const int chunks = micro_batches / pp;
  std::vector<int> plan(dp);
  for (int d = 0; d < dp; ++d) plan[d] = (chunks / dp + (d < chunks % dp ? 1 : 0)) * pp;
  return plan;
}

absl::Status ValidateMicroBatchPlan(const std::vector<int>& plan, int dp, int pp,
                                    int micro_batches) {
  if (static_cast<int>(plan.size()) != dp) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan has ", plan.size(),
                                                   " entries; the layout has ", dp, " DP groups"));
  }
  int64_t sum = 0;
  for (int d = 0; d < dp; ++d) {
    if (plan[d] < 0 || plan[d] % pp != 0) {
      return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan.micro_batches[", d, "] = ",
                                                     plan[d], " is not a multiple of PP = ", pp));
    }
    sum += plan[d];
  }
  if (sum != micro_batches) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batch_plan sums to ", sum,
                                                   "; the global batch has ", micro_batches,
                                                   " micro-batches"));
  }
  return absl::OkStatus();
}

int MicroBatchOffset(const std::vector<int>& plan, int dp) {
  int offset = 0;
  for (int d = 0; d < dp; ++d) offset += plan[d];
  return offset;
}

}  // namespace falcon::trainer::directives
