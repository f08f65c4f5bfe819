#include "collective/comm_id.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/split_mix.h"

namespace falcon::collective {
namespace {

using common::SplitMix64;

uint64_t NonZero(uint64_t id) { return id == 0 ? 1 : id; }

}  // namespace

uint64_t MixIds(uint64_t a, uint64_t b) {
  return SplitMix64(SplitMix64(a) ^ (b + 0x632be59bd9b4e019ULL));
}

uint64_t WorldCommId(int world_size, uint64_t salt) {
  return NonZero(MixIds(MixIds(0x46414c434f4e5752ULL /* "FALCONWR" */, salt),
                        static_cast<uint64_t>(world_size)));
}

uint64_t SplitCommId(uint64_t parent, int color, uint64_t split_seq) {
  return NonZero(
      MixIds(MixIds(parent, split_seq), static_cast<uint64_t>(static_cast<int64_t>(color))));
}

absl::StatusOr<std::optional<SplitGroup>> PlanSplit(
    const std::vector<std::pair<int, int>>& color_keys, int my_parent_rank) {
  const int n = static_cast<int>(color_keys.size());
  if (my_parent_rank < 0 || my_parent_rank >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("split: rank ", my_parent_rank, " outside [0, ", n, ")"));
  }
  for (int i = 0; i < n; ++i) {
    if (color_keys[i].first < -1) {
      return absl::InvalidArgumentError(absl::StrCat("split: rank ", i, " passed color ",
                                                     color_keys[i].first, " (want >= 0 or -1)"));
    }
  }
  const int my_color = color_keys[my_parent_rank].first;
  if (my_color == -1) return std::optional<SplitGroup>();
  SplitGroup group;
  for (int i = 0; i < n; ++i) {
    if (color_keys[i].first == my_color) group.parent_ranks.push_back(i);
  }
  std::stable_sort(group.parent_ranks.begin(), group.parent_ranks.end(), [&](int a, int b) {
    return std::make_pair(color_keys[a].second, a) < std::make_pair(color_keys[b].second, b);
  });
  group.new_rank = static_cast<int>(
      std::find(group.parent_ranks.begin(), group.parent_ranks.end(), my_parent_rank) -
      group.parent_ranks.begin());
  return std::optional<SplitGroup>(std::move(group));
}

}  // namespace falcon::collective
