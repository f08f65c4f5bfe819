#include "trainer/checkpoint/restart_plan.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace falcon::trainer::checkpoint {

absl::StatusOr<RestartPlan> PlanRestart(int old_world, int pp, int micro_batches,
                                        const std::vector<int>& excluded,
                                        const collective::fault::FaultPlan& faults, int nodes) {
  std::vector<bool> gone(old_world, false);
  for (int r : excluded) {
    if (r < 0 || r >= old_world) {
      return absl::InvalidArgumentError(
          absl::StrCat("excluded rank ", r, " is outside the world of ", old_world));
    }
    gone[r] = true;
  }
  std::vector<int> survivors;
  for (int r = 0; r < old_world; ++r) {
    if (!gone[r]) survivors.push_back(r);
  }
  const int dp = std::min(static_cast<int>(survivors.size()) / pp, micro_batches / pp);
  if (dp < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        survivors.size(), " ranks survive the restart; a pipeline of ", pp, " needs more"));
  }
  RestartPlan plan;
  plan.dp = dp;
  plan.pp = pp;
  plan.world = dp * pp;
  plan.old_rank.assign(survivors.begin(), survivors.begin() + plan.world);
  plan.nodes = 1;
  for (int k = std::max(1, nodes); k >= 1; --k) {
    if (plan.world % k == 0) {
      plan.nodes = k;
      break;
    }
  }
  std::map<int, int> new_of;
  for (int i = 0; i < plan.world; ++i) new_of[plan.old_rank[i]] = i;
  for (collective::fault::ComputeFault f : faults.compute) {
    if (!new_of.count(f.rank)) continue;
    f.rank = new_of[f.rank];
    plan.faults.compute.push_back(f);
  }
  for (collective::fault::LinkFault f : faults.links) {
    if (!new_of.count(f.src) || !new_of.count(f.dst)) continue;
    f.src = new_of[f.src];
    f.dst = new_of[f.dst];
    plan.faults.links.push_back(f);
  }
  for (collective::fault::ContentionFault f : faults.contention) {
    if (!new_of.count(f.rank)) continue;
    f.rank = new_of[f.rank];
    plan.faults.contention.push_back(f);
  }
  return plan;
}

}  // namespace falcon::trainer::checkpoint
