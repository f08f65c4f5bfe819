#include "analysis/detect/peer_links.h"

#include <algorithm>

#include "analysis/detect/bandwidth_reference.h"

namespace falcon::analysis::detect {

absl::Status PeerLinkOptions::Validate() const {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError("slow_ratio: must be in (0, 10]");
  }
  if (min_links < 2) return absl::InvalidArgumentError("min_links: must be >= 2");
  if (!(noise_sigmas >= 0 && noise_sigmas <= 100)) {
    return absl::InvalidArgumentError("noise_sigmas: must be in [0, 100]");
  }
  return absl::OkStatus();
}

std::vector<PeerLinkRanking::Link> PeerLinkRanking::Slow() const {
  std::vector<Link> out;
  for (const Link& l : links) {
    if (l.slow) out.push_back(l);
  }
  return out;
}

PeerLinkRanking RankPeerLinks(const std::map<PeerLinkKey, PeerLinkTotals>& links,
                              const PeerLinkOptions& options) {
  PeerLinkRanking out;
  std::map<std::string, std::vector<PeerLinkRanking::Link>> groups;
  for (const auto& [key, t] : links) {
    if (t.bytes == 0 || t.bytes < options.min_bytes || t.busy <= absl::ZeroDuration()) {
      ++out.links_unjudged;
      continue;
    }
    PeerLinkRanking::Link l;
    l.key = key;
    l.group = t.group;
    l.bytes_per_second = static_cast<double>(t.bytes) / absl::ToDoubleSeconds(t.busy);
    groups[t.group].push_back(l);
  }
  for (auto& [group, members] : groups) {
    if (static_cast<int>(members.size()) < options.min_links) {
      out.links_unjudged += static_cast<int>(members.size());
      continue;
    }
    ++out.groups_judged;
    std::vector<double> bw;
    for (const PeerLinkRanking::Link& l : members) bw.push_back(l.bytes_per_second);
    const BandwidthReference judge = JudgeBandwidths(bw, options.slow_ratio, options.noise_sigmas);
    for (PeerLinkRanking::Link& l : members) {
      l.ratio = judge.Ratio(l.bytes_per_second);
      l.slow = judge.Slow(l.bytes_per_second);
      out.links.push_back(l);
    }
  }
  std::sort(out.links.begin(), out.links.end(),
            [](const PeerLinkRanking::Link& a, const PeerLinkRanking::Link& b) {
              if (a.ratio != b.ratio) return a.ratio > b.ratio;
              return a.key < b.key;
            });
  // Endpoints: every measured link touching the rank is slow, and there are at least two.
  std::map<uint32_t, std::pair<int, int>> touching;  // rank -> (links, slow links)
  for (const PeerLinkRanking::Link& l : out.links) {
    for (uint32_t r : {l.key.src, l.key.dst}) {
      ++touching[r].first;
      if (l.slow) ++touching[r].second;
    }
  }
  for (const auto& [rank, n] : touching) {
    if (n.first >= 2 && n.second == n.first) out.endpoints.push_back(rank);
  }
  return out;
}

}  // namespace falcon::analysis::detect
