#include "controller/detection/node_nic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/detect/bandwidth_reference.h"
#include "common/stats.h"

namespace falcon::controller::detection {
namespace {

using DirectedLink = std::pair<uint32_t, uint32_t>;

const std::string* NodeOf(const RankNodes& nodes, uint32_t rank) {
  auto it = nodes.find(rank);
  return it == nodes.end() || it->second.empty() ? nullptr : &it->second;
}

falcon::v1::Link ToLink(const DirectedLink& l) {
  falcon::v1::Link link;
  link.set_src_rank(l.first);
  link.set_dst_rank(l.second);
  return link;
}

// What a cross-node link is judged with.
struct Judged {
  std::string src_node;
  std::string dst_node;
  double ratio = 0;  // Reference / bandwidth.
  bool slow = false;
};

}  // namespace

NodeNicResult FindNodeNicFaults(const std::vector<LinkFigure>& links, const RankNodes& nodes,
                                const std::vector<falcon::v1::Link>& other_slow,
                                const NodeNicOptions& options) {
  NodeNicResult result;
  if (!(options.slow_ratio > 0 && options.slow_ratio <= 10) ||
      !(options.noise_sigmas >= 0 && options.noise_sigmas <= 100)) {
    return result;
  }
  // The fastest figure of each directed link between two known, different nodes.
  std::map<DirectedLink, double> best;
  bool unknown_slow = false;  // A slow link the nodes cannot place (rule 4 then names nobody).
  for (const LinkFigure& l : links) {
    if (!std::isfinite(l.bandwidth) || l.bandwidth <= 0) continue;
    const std::string* a = NodeOf(nodes, l.src);
    const std::string* b = NodeOf(nodes, l.dst);
    if (a == nullptr || b == nullptr || *a == *b) continue;  // Not through a NIC, or unknown.
    double& v = best[{l.src, l.dst}];
    v = std::max(v, l.bandwidth);
  }
  result.cross_node_links = static_cast<int>(best.size());
  if (best.empty()) return result;

  // Each node pair's figure is the median of its links; the reference is the pairs' upper
  // quartile (a NIC slows n - 1 of the n (n - 1) / 2 pairs).
  std::map<std::pair<std::string, std::string>, std::vector<double>> pair_figures;
  for (const auto& [link, bw] : best) {
    const std::string& a = *NodeOf(nodes, link.first);
    const std::string& b = *NodeOf(nodes, link.second);
    pair_figures[std::minmax(a, b)].push_back(bw);
  }
  result.node_pairs = static_cast<int>(pair_figures.size());
  std::vector<double> medians;
  for (const auto& [pair, v] : pair_figures) medians.push_back(common::Median(v));
  const analysis::detect::BandwidthReference judge =
      analysis::detect::JudgeBandwidths(medians, options.slow_ratio, options.noise_sigmas);

  std::map<DirectedLink, Judged> judged;
  std::map<std::string, int> fine_links;  // Per node, its cross-node links that are fine.
  std::vector<std::pair<double, DirectedLink>> slow;
  for (const auto& [link, bw] : best) {
    Judged& j = judged[link];
    j.src_node = *NodeOf(nodes, link.first);
    j.dst_node = *NodeOf(nodes, link.second);
    j.ratio = judge.Ratio(bw);
    j.slow = judge.Slow(bw);
    if (j.slow) {
      slow.push_back({j.ratio, link});
    } else {
      ++fine_links[j.src_node];
      ++fine_links[j.dst_node];
    }
  }
  std::stable_sort(slow.begin(), slow.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (const auto& [ratio, link] : slow) {
    result.slow_links.push_back(ToLink(link));
    result.slow_ratios.push_back(ratio);
  }

  // Rules (a)-(c) per node.
  std::map<std::string, std::vector<DirectedLink>> links_of;
  for (const auto& [link, j] : judged) {
    links_of[j.src_node].push_back(link);
    links_of[j.dst_node].push_back(link);
  }
  std::vector<NodeNicFault> named;
  std::vector<std::string> notes;
  for (const auto& [node, own] : links_of) {
    if (own.size() < 2 || fine_links.count(node) > 0) continue;  // (a)
    std::set<std::string> peers;
    bool peer_fine = false;
    for (const DirectedLink& l : own) {
      const Judged& j = judged[l];
      const std::string& peer = j.src_node == node ? j.dst_node : j.src_node;
      peers.insert(peer);
      peer_fine = peer_fine || fine_links.count(peer) > 0;
    }
    if (peers.size() < 2) {  // (b)
      notes.push_back(absl::StrCat("every measured link of node ", node, " to other nodes is slow",
                                   ", but they all reach node ", *peers.begin(), ": either NIC or ",
                                   "the path between them"));
      continue;
    }
    if (!peer_fine) {  // (c)
      notes.push_back(absl::StrCat("every measured link of node ", node, " to other nodes is slow",
                                   ", but none of the nodes they reach (",
                                   absl::StrJoin(peers, ", "),
                                   ") was measured fine with another node"));
      continue;
    }
    NodeNicFault f;
    f.node = node;
    f.peers.assign(peers.begin(), peers.end());
    std::vector<std::pair<double, DirectedLink>> mine;
    for (const DirectedLink& l : own) mine.push_back({judged[l].ratio, l});
    std::stable_sort(mine.begin(), mine.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (const auto& [ratio, l] : mine) {
      f.links.push_back(ToLink(l));
      f.ratios.push_back(ratio);
    }
    named.push_back(std::move(f));
  }

  // Rule 4: the named nodes explain every slow link, the judgment's and the communicators'.
  std::set<std::string> named_nodes;
  for (const NodeNicFault& f : named) named_nodes.insert(f.node);
  std::vector<std::string> unexplained;
  auto explained = [&](uint32_t src, uint32_t dst) {
    const std::string* a = NodeOf(nodes, src);
    const std::string* b = NodeOf(nodes, dst);
    if (a == nullptr || b == nullptr) {
      unknown_slow = true;
      return false;
    }
    return *a != *b && (named_nodes.count(*a) > 0 || named_nodes.count(*b) > 0);
  };
  for (const auto& [ratio, l] : slow) {
    if (!explained(l.first, l.second)) unexplained.push_back(absl::StrCat(l.first, "->", l.second));
  }
  for (const falcon::v1::Link& l : other_slow) {
    if (!explained(l.src_rank(), l.dst_rank())) {
      unexplained.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    }
  }
  if (!named.empty() && !unexplained.empty()) {
    std::vector<std::string> names(named_nodes.begin(), named_nodes.end());
    notes.push_back(absl::StrCat(
        "every measured link of node ", absl::StrJoin(names, ", "),
        " to other nodes is slow, but so is link ", absl::StrJoin(unexplained, ","),
        unknown_slow ? " (an end's node unknown)" : " (not one of theirs, or inside a node)",
        ": not named as a NIC"));
    named.clear();
  }
  result.faults = std::move(named);
  if (result.faults.empty()) result.note = absl::StrJoin(notes, "; ");
  return result;
}

std::string DescribeNodeNicFaults(const NodeNicResult& result) {
  std::vector<std::string> parts;
  for (const NodeNicFault& f : result.faults) {
    parts.push_back(absl::StrFormat(
        "NIC of node %s: all %d measured links to other nodes are slow (x%.2f the reference node "
        "pair at worst), to %s",
        f.node, f.links.size(), f.ratios.empty() ? 0.0 : f.ratios.front(),
        absl::StrJoin(f.peers, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

std::vector<std::pair<double, falcon::v1::Link>> NodeNicVerdictLinks(
    const std::vector<std::pair<double, falcon::v1::Link>>& slow, const NodeNicResult& nic,
    std::vector<std::string>* nodes) {
  std::map<std::pair<uint32_t, uint32_t>, double> ratio_of;
  auto keep = [&](const falcon::v1::Link& l, double ratio) {
    double& r = ratio_of[{l.src_rank(), l.dst_rank()}];
    r = std::max(r, ratio);
  };
  for (const auto& [r, l] : slow) keep(l, r);
  for (const NodeNicFault& f : nic.faults) {
    nodes->push_back(f.node);
    for (size_t i = 0; i < f.links.size(); ++i) keep(f.links[i], f.ratios[i]);
  }
  std::vector<std::pair<double, falcon::v1::Link>> all;
  for (const auto& [k, r] : ratio_of) {
    falcon::v1::Link l;
    l.set_src_rank(k.first);
    l.set_dst_rank(k.second);
    all.push_back({r, l});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return all;
}

}  // namespace falcon::controller::detection
