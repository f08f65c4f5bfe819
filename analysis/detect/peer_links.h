// Ranking links from per-peer transfer timing (docs/algorithms.md#peer-timing): NCCL's profiler
// plugin times the network part of every op per peer (peer transfers, OpKind PEER_SEND /
// PEER_RECV); summed over the profiled iterations, each directed link (src -> dst) of a
// communicator gets a bandwidth, bytes / busy time. Links are compared within their group
// (communicators of one role, so that a DP ring's links are compared with DP links), against the
// group's upper quartile and beyond the noise of its healthy links (bandwidth_reference.h, as in
// docs/algorithms.md#pairwise-localization).
// A rank all of whose (at least 2) measured links are slow is its NIC's or node's fault: it is
// named as an endpoint. Falcon's own method. Pure.
#ifndef FALCON_ANALYSIS_DETECT_PEER_LINKS_H_
#define FALCON_ANALYSIS_DETECT_PEER_LINKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace falcon::analysis::detect {

struct PeerLinkKey {
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t comm_id = 0;
  friend bool operator<(const PeerLinkKey& a, const PeerLinkKey& b) {
    return std::tie(a.src, a.dst, a.comm_id) < std::tie(b.src, b.dst, b.comm_id);
  }
};

// What one link moved over the profiled iterations (both ends' records added together).
struct PeerLinkTotals {
  std::string group;    // Comparison group: the communicator's role ("COMM_KIND_DP", ...).
  uint64_t bytes = 0;   // Bytes moved.
  absl::Duration busy;  // Time with a transfer in flight.
  int transfers = 0;    // Peer transfer records.
};

struct PeerLinkOptions {
  // A link is slow when reference / bandwidth >= 1 + slow_ratio, (0, 10]. Default 0.10 (the
  // verdict's link threshold).
  double slow_ratio = 0.10;
  // Groups with fewer measured links are not judged (no reference), >= 2. Default 3.
  int min_links = 3;
  // Links with fewer bytes (or none, or no busy time) are not judged (too little to time).
  // Default 64 KiB.
  uint64_t min_bytes = 64 << 10;
  // And only this many robust deviations below the healthy links' median, when at least 8 links
  // of the group are healthy (bandwidth_reference.h), [0, 100]; 0 turns it off. Default 4.
  double noise_sigmas = 4;

  absl::Status Validate() const;  // kInvalidArgument naming the field.
};

struct PeerLinkRanking {
  struct Link {
    PeerLinkKey key;
    std::string group;
    double bytes_per_second = 0;
    double ratio = 0;  // Group reference / this link's bandwidth; >= 1 + slow_ratio: slow.
    bool slow = false;
  };
  std::vector<Link> links;          // Judged links, slowest (highest ratio) first.
  std::vector<uint32_t> endpoints;  // Ranks every (>= 2) measured link of which is slow.
  int groups_judged = 0;
  int links_unjudged = 0;  // Too few bytes, or in a group with fewer than min_links links.

  std::vector<Link> Slow() const;
};

PeerLinkRanking RankPeerLinks(const std::map<PeerLinkKey, PeerLinkTotals>& links,
                              const PeerLinkOptions& options);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_PEER_LINKS_H_
