// Communicator ids and split planning, shared by every backend so ids agree across backends and
// members. Pure functions; thread-safe.
#ifndef FALCON_COLLECTIVE_COMM_ID_H_
#define FALCON_COLLECTIVE_COMM_ID_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::collective {

// Stable 64-bit mix of two values (splitmix64 finalizer over a combination). Same result in every
// process and build.
uint64_t MixIds(uint64_t a, uint64_t b);

// Id of a job's world communicator: `salt` (0 when the job has none) mixed with the world size.
// Never 0.
uint64_t WorldCommId(int world_size, uint64_t salt = 0);

// Id of the sub-communicator `color` made by split number `split_seq` (1, 2, ...) of `parent`.
// Never 0.
uint64_t SplitCommId(uint64_t parent, int color, uint64_t split_seq);

// This member's group after a split.
struct SplitGroup {
  std::vector<int> parent_ranks;  // Members as parent communicator ranks, in new-rank order.
  int new_rank = 0;               // Position of `my_parent_rank` in parent_ranks.
};

// Groups members by color and orders each group by (key, parent rank). `color_keys[i]` is the
// (color, key) of parent rank i. std::nullopt when this member's color is kNoColor (-1).
// kInvalidArgument for a color < -1 or my_parent_rank out of range.
absl::StatusOr<std::optional<SplitGroup>> PlanSplit(
    const std::vector<std::pair<int, int>>& color_keys, int my_parent_rank);

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_COMM_ID_H_
