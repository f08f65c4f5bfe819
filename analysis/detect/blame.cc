#include "analysis/detect/blame.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

double Ratio(absl::Duration a, absl::Duration b) {
  return b > absl::ZeroDuration() ? absl::FDivDuration(a, b) : 0.0;
}

}  // namespace

absl::string_view BlameCauseName(BlameCause cause) {
  return cause == BlameCause::kCompute ? "compute" : "communication";
}

absl::Status BlameOptions::Validate() const {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slow_ratio must be in (0, 10], got ", slow_ratio));
  }
  if (!(min_excess_fraction >= 0 && min_excess_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_excess_fraction must be in [0, 1], got ", min_excess_fraction));
  }
  return absl::OkStatus();
}

absl::StatusOr<BlameResult> BlameStep(const BlameInput& input, const BlameOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  // Validate and collect per-rank totals.
  absl::flat_hash_map<int64_t, absl::Duration> total;  // compute + busy, per rank.
  for (const RankCompute& r : input.ranks) {
    if (r.compute < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", input.step, ": rank ", r.rank, " has negative compute time"));
    }
    if (!total.emplace(r.rank, r.compute).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", input.step, ": rank ", r.rank, " appears twice"));
    }
  }
  absl::flat_hash_set<uint64_t> comm_ids;
  for (const CommTiming& c : input.comms) {
    if (!comm_ids.insert(c.comm_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", input.step, ": communicator ", c.comm_id, " appears twice"));
    }
    if (c.members.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step ", input.step, ": communicator ", c.comm_id, " has no members"));
    }
    absl::flat_hash_set<int64_t> seen;
    for (const CommMember& m : c.members) {
      if (!seen.insert(m.rank).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "step ", input.step, ": communicator ", c.comm_id, " lists rank ", m.rank, " twice"));
      }
      if (m.busy < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat("step ", input.step, ": rank ", m.rank,
                                                       " has negative busy time in communicator ",
                                                       c.comm_id));
      }
      total[m.rank] += m.busy;
    }
  }

  BlameResult result;
  result.step = input.step;
  result.iteration_time = input.iteration_time;
  if (result.iteration_time <= absl::ZeroDuration() && !total.empty()) {
    std::vector<absl::Duration> totals;
    for (const auto& [rank, t] : total) totals.push_back(t);
    result.iteration_time = common::Median(totals);
  }
  const absl::Duration material = result.iteration_time * options.min_excess_fraction;
  const double limit = 1.0 + options.slow_ratio;

  // Compute: against the median of the rank's group.
  std::map<int64_t, std::vector<absl::Duration>> by_group;
  for (const RankCompute& r : input.ranks) by_group[r.group].push_back(r.compute);
  std::map<int64_t, absl::Duration> group_median;
  for (auto& [group, v] : by_group) {
    if (v.size() >= 2) group_median[group] = common::Median(v);
  }
  for (const RankCompute& r : input.ranks) {
    auto it = group_median.find(r.group);
    if (it == group_median.end()) continue;
    const absl::Duration median = it->second;
    if (r.compute > median * limit && r.compute - median >= material) {
      result.blamed.push_back(
          {r.rank, BlameCause::kCompute, Ratio(r.compute, median), r.compute - median, 0});
    }
  }

  // Communication: transfer = least time of any member; compare within (kind, bytes).
  std::vector<absl::Duration> transfer(input.comms.size());
  std::map<std::pair<std::string, int64_t>, std::vector<size_t>> comparable;
  for (size_t i = 0; i < input.comms.size(); ++i) {
    const CommTiming& c = input.comms[i];
    absl::Duration least = absl::InfiniteDuration();
    for (const CommMember& m : c.members) {
      least = std::min(least, m.transfer >= absl::ZeroDuration() ? m.transfer : m.busy);
    }
    transfer[i] = least;
    comparable[{c.kind, c.bytes}].push_back(i);
  }
  // Compute excess of the ranks blamed for compute, to explain their communicators' waits.
  absl::flat_hash_map<int64_t, absl::Duration> compute_excess;
  for (const Blame& b : result.blamed) compute_excess[b.rank] = b.excess;
  std::vector<size_t> material_comms;
  std::vector<double> comm_ratio(input.comms.size(), 0.0);
  std::vector<absl::Duration> comm_excess(input.comms.size());
  for (const auto& [key, members] : comparable) {
    if (members.size() < 2) continue;
    std::vector<absl::Duration> v;
    for (size_t i : members) v.push_back(transfer[i]);
    const absl::Duration median = common::Median(v);
    for (size_t i : members) {
      if (!(transfer[i] > median * limit)) continue;
      comm_ratio[i] = Ratio(transfer[i], median);
      comm_excess[i] = transfer[i] - median;
      SuspiciousComm s{input.comms[i].comm_id, transfer[i], comm_ratio[i]};
      // The slowest-computing member that outweighs the communicator's excess, if any.
      absl::Duration explained = absl::ZeroDuration();
      for (const CommMember& m : input.comms[i].members) {
        auto it = compute_excess.find(m.rank);
        if (it != compute_excess.end() && it->second >= comm_excess[i] && it->second > explained) {
          explained = it->second;
          s.explained_by_rank = m.rank;
        }
      }
      s.material = comm_excess[i] >= material;
      result.suspicious.push_back(s);
      if (s.explained_by_rank < 0 && s.material) material_comms.push_back(i);
    }
  }
  absl::flat_hash_map<int64_t, int> memberships;
  for (size_t i : material_comms) {
    for (const CommMember& m : input.comms[i].members) ++memberships[m.rank];
  }
  absl::flat_hash_map<int64_t, size_t> comm_blame;  // rank -> index in result.blamed
  for (size_t i : material_comms) {
    int most = 0;
    for (const CommMember& m : input.comms[i].members) most = std::max(most, memberships[m.rank]);
    for (const CommMember& m : input.comms[i].members) {
      if (memberships[m.rank] != most) continue;
      const Blame b{m.rank, BlameCause::kCommunication, comm_ratio[i], comm_excess[i],
                    input.comms[i].comm_id};
      auto [it, inserted] = comm_blame.emplace(m.rank, result.blamed.size());
      if (inserted) {
        result.blamed.push_back(b);
      } else if (b.ratio > result.blamed[it->second].ratio) {
        result.blamed[it->second] = b;
      }
    }
  }
  std::sort(result.suspicious.begin(), result.suspicious.end(),
            [](const SuspiciousComm& a, const SuspiciousComm& b) { return a.comm_id < b.comm_id; });
  std::sort(result.blamed.begin(), result.blamed.end(), [](const Blame& a, const Blame& b) {
    return std::tie(a.rank, a.cause) < std::tie(b.rank, b.cause);
  });
  return result;
}

}  // namespace falcon::analysis::detect
