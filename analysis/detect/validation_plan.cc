#include "analysis/detect/validation_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/stats.h"

namespace falcon::analysis::detect {

std::vector<uint32_t> AssignRounds(const std::vector<std::vector<std::string>>& footprints) {
  std::vector<absl::flat_hash_set<std::string>> used;  // Nodes of each round so far.
  std::vector<uint32_t> rounds;
  rounds.reserve(footprints.size());
  for (const std::vector<std::string>& nodes : footprints) {
    size_t round = used.size();
    if (!nodes.empty()) {
      for (size_t r = 0; r < used.size(); ++r) {
        if (std::none_of(nodes.begin(), nodes.end(),
                         [&](const std::string& n) { return used[r].contains(n); })) {
          round = r;
          break;
        }
      }
    }
    if (round == used.size()) used.emplace_back();
    used[round].insert(nodes.begin(), nodes.end());
    // A task without nodes shares its round with nothing: mark it so.
    if (nodes.empty()) used[round].insert("");
    rounds.push_back(static_cast<uint32_t>(round + 1));
  }
  return rounds;
}

absl::StatusOr<PassPlan> PlanRingPasses(absl::Span<const int64_t> ring) {
  if (ring.empty()) return absl::InvalidArgumentError("ring has no ranks");
  absl::flat_hash_set<int64_t> seen;
  for (int64_t r : ring) {
    if (r < 0) return absl::InvalidArgumentError(absl::StrCat("ring rank ", r, " is negative"));
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " appears twice in the ring"));
    }
  }
  const size_t n = ring.size();
  PassPlan plan;
  if (n == 1) return plan;
  std::vector<LinkPair> even, odd, closing;
  for (size_t i = 0; i < n; ++i) {
    const LinkPair link{ring[i], ring[(i + 1) % n]};
    if (n % 2 == 1 && i == n - 1) {
      closing.push_back(link);
    } else {
      (i % 2 == 0 ? even : odd).push_back(link);
    }
  }
  for (auto* pass : {&even, &odd, &closing}) {
    if (!pass->empty()) plan.passes.push_back(std::move(*pass));
  }
  return plan;
}

std::vector<TreeEdge> HeapTree(absl::Span<const int64_t> ranks) {
  std::vector<TreeEdge> edges;
  for (size_t i = 1; i < ranks.size(); ++i) {
    edges.push_back({ranks[i], ranks[(i - 1) / 2], i % 2 == 1});
  }
  return edges;
}

absl::StatusOr<PassPlan> PlanTreePasses(absl::Span<const TreeEdge> edges) {
  PassPlan plan;
  if (edges.empty()) return plan;
  absl::flat_hash_map<int64_t, const TreeEdge*> parent_of;
  std::map<std::pair<int64_t, bool>, int64_t> child_of;  // (parent, left) -> child
  absl::flat_hash_set<int64_t> nodes;
  for (const TreeEdge& e : edges) {
    if (e.child == e.parent) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", e.child, " is its own parent"));
    }
    if (!parent_of.emplace(e.child, &e).second) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", e.child, " has two parents"));
    }
    if (!child_of.emplace(std::make_pair(e.parent, e.left), e.child).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", e.parent, " has two ", e.left ? "left" : "right", " children"));
    }
    nodes.insert(e.child);
    nodes.insert(e.parent);
  }
  std::vector<int64_t> roots;
  for (int64_t n : nodes) {
    if (!parent_of.contains(n)) roots.push_back(n);
  }
  if (roots.size() != 1) {
    std::sort(roots.begin(), roots.end());
    return absl::InvalidArgumentError(roots.empty() ? std::string("the tree has no root (a cycle)")
                                                    : absl::StrCat("the tree has ", roots.size(),
                                                                   " roots, e.g. ranks ", roots[0],
                                                                   " and ", roots[1]));
  }
  // Depth of every node from the root (breadth first); nodes not reached sit on a cycle.
  absl::flat_hash_map<int64_t, int> depth = {{roots[0], 0}};
  std::vector<int64_t> frontier = {roots[0]};
  while (!frontier.empty()) {
    std::vector<int64_t> next;
    for (int64_t p : frontier) {
      for (bool left : {true, false}) {
        auto it = child_of.find({p, left});
        if (it == child_of.end()) continue;
        depth[it->second] = depth[p] + 1;
        next.push_back(it->second);
      }
    }
    frontier = std::move(next);
  }
  std::vector<LinkPair> passes[4];  // even-left, even-right, odd-left, odd-right
  for (const TreeEdge& e : edges) {
    auto it = depth.find(e.child);
    if (it == depth.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", e.child, " is on a cycle, not below the root ", roots[0]));
    }
    const int index = (it->second % 2 == 0 ? 0 : 2) + (e.left ? 0 : 1);
    passes[index].push_back({e.child, e.parent});
  }
  for (auto& pass : passes) {
    if (pass.empty()) continue;
    std::sort(pass.begin(), pass.end(), [](const LinkPair& a, const LinkPair& b) {
      return std::make_pair(a.src, a.dst) < std::make_pair(b.src, b.dst);
    });
    plan.passes.push_back(std::move(pass));
  }
  return plan;
}

absl::StatusOr<std::vector<SlowLink>> FindSlowLinks(const PassPlan& plan,
                                                    absl::Span<const LinkMeasurement> measured,
                                                    double slow_ratio) {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slow_ratio must be in (0, 10], got ", slow_ratio));
  }
  struct Acc {
    int pass = 0;
    absl::Duration sum;
    int count = 0;
  };
  std::map<std::pair<int64_t, int64_t>, Acc> links;
  for (size_t p = 0; p < plan.passes.size(); ++p) {
    for (const LinkPair& l : plan.passes[p]) links[{l.src, l.dst}].pass = static_cast<int>(p);
  }
  for (const LinkMeasurement& m : measured) {
    auto it = links.find({m.src, m.dst});
    if (it == links.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("link ", m.src, "->", m.dst, " was measured but is not in the plan"));
    }
    if (m.time <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "link ", m.src, "->", m.dst, " has a time <= 0: ", absl::FormatDuration(m.time)));
    }
    it->second.sum += m.time;
    ++it->second.count;
  }
  std::vector<absl::Duration> means;
  for (const auto& [link, acc] : links) {
    if (acc.count == 0) {
      return absl::InvalidArgumentError(absl::StrCat("link ", link.first, "->", link.second,
                                                     " (pass ", acc.pass, ") has no measurement"));
    }
    means.push_back(acc.sum / acc.count);
  }
  std::vector<SlowLink> slow;
  if (means.empty()) return slow;
  const absl::Duration median = common::Median(means);
  for (const auto& [link, acc] : links) {
    const absl::Duration mean = acc.sum / acc.count;
    if (mean > median * (1.0 + slow_ratio)) {
      slow.push_back({link.first, link.second, acc.pass, mean, absl::FDivDuration(mean, median)});
    }
  }
  std::sort(slow.begin(), slow.end(), [](const SlowLink& a, const SlowLink& b) {
    return a.ratio != b.ratio ? a.ratio > b.ratio
                              : std::make_pair(a.src, a.dst) < std::make_pair(b.src, b.dst);
  });
  return slow;
}

PassPlan Reversed(const PassPlan& plan) {
  PassPlan out;
  for (const std::vector<LinkPair>& pass : plan.passes) {
    std::vector<LinkPair> back;
    back.reserve(pass.size());
    for (const LinkPair& l : pass) back.push_back({l.dst, l.src});
    out.passes.push_back(std::move(back));
  }
  return out;
}

PassPlan SeparateOpposingLinks(const PassPlan& plan,
                               const std::function<std::string(int64_t)>& node_of) {
  PassPlan out;
  for (const std::vector<LinkPair>& pass : plan.passes) {
    // Per part: its links, and the directed node pairs they cross.
    std::vector<std::vector<LinkPair>> parts;
    std::vector<std::set<std::pair<std::string, std::string>>> crossings;
    for (const LinkPair& l : pass) {
      const std::string from = node_of(l.src);
      const std::string to = node_of(l.dst);
      const bool crosses = !from.empty() && !to.empty() && from != to;
      size_t i = 0;
      while (i < parts.size() && crosses && crossings[i].count({to, from}) > 0) ++i;
      if (i == parts.size()) {
        parts.emplace_back();
        crossings.emplace_back();
      }
      parts[i].push_back(l);
      if (crosses) crossings[i].insert({from, to});
    }
    for (std::vector<LinkPair>& p : parts) out.passes.push_back(std::move(p));
  }
  return out;
}

}  // namespace falcon::analysis::detect
