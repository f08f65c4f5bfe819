// Node NIC faults (docs/algorithms.md#node-nic-faults): which nodes' NICs explain a set of measured
// links. A slow NIC slows every link between a rank of its node and a rank of another node, in
// both directions, while links inside the node (loopback, shared memory, NVLink) and links among
// other nodes stay fast. The links are judged across communicators, by node pair, against the
// upper quartile of the node pairs (analysis/detect/bandwidth_reference.h, as in
// docs/algorithms.md#pairwise-localization), not against each communicator's median: in a DP
// group over two nodes every cross-node link touches the slow node, so its median is a slow link.
// A node is named when
//   (a) at least 2 of its cross-node links were measured and every one of them is slow;
//   (b) they reach at least 2 other nodes (slow links to one node only are as well that node's
//       NIC or the path between the two);
//   (c) at least one of those nodes has a measured cross-node link that is fine (otherwise the
//       peers' own NICs explain it);
// and only when the named nodes together explain every slow link: every slow cross-node link of
// the judgment, and every link in `other_slow` (the communicators' own judgment), has an end on a
// named node and crosses nodes. Falcon's own method. Pure.
#ifndef FALCON_CONTROLLER_DETECTION_NODE_NIC_H_
#define FALCON_CONTROLLER_DETECTION_NODE_NIC_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::detection {

// Rank -> the node it registered (RankInfo.node). A rank that is missing or has "" is on an
// unknown node: its links are not judged, and when one of them is slow no node is named.
using RankNodes = std::map<uint32_t, std::string>;

// One measured directed link, with a figure comparable across every link given: bytes per ns of a
// validation pass (every pass moves the same bytes), or a peer-timing link's bandwidth over its
// group's reference (1 / ratio). A link given more than once keeps its fastest figure.
struct LinkFigure {
  uint32_t src = 0;
  uint32_t dst = 0;
  double bandwidth = 0;  // Larger is faster; links with a figure that is not finite and > 0
                         // are ignored.
};

struct NodeNicOptions {
  // A link is slow when reference / bandwidth >= 1 + slow_ratio, (0, 10]; the verdict's
  // link_slow_ratio. Out of range: nothing is named.
  double slow_ratio = 0.10;
  // And beyond this many robust deviations of the healthy node pairs when at least 8 are healthy
  // (bandwidth_reference.h), [0, 100]; 0 turns it off.
  double noise_sigmas = 4;
};

struct NodeNicFault {
  std::string node;
  // Its measured cross-node links (all slow), slowest first; ratio = reference / bandwidth.
  std::vector<falcon::v1::Link> links;
  std::vector<double> ratios;      // Of `links`, in their order.
  std::vector<std::string> peers;  // The nodes they reach, ascending.
};

struct NodeNicResult {
  // Named nodes, ascending by name; empty: none (the verdict stays one of links).
  std::vector<NodeNicFault> faults;
  int cross_node_links = 0;  // Distinct directed links between two known, different nodes.
  int node_pairs = 0;        // Distinct unordered node pairs they join.
  // Cross-node links slow against the reference, slowest first, with their ratios.
  std::vector<falcon::v1::Link> slow_links;
  std::vector<double> slow_ratios;
  // For humans, when no node is named although a node's cross-node links are all slow: why
  // (rule (b), (c) or the unexplained slow links). Empty otherwise.
  std::string note;
};

NodeNicResult FindNodeNicFaults(const std::vector<LinkFigure>& links, const RankNodes& nodes,
                                const std::vector<falcon::v1::Link>& other_slow,
                                const NodeNicOptions& options);

// "NIC of node node-2: all 12 measured links to other nodes are slow (x3.10 the reference node
// pair at worst), to node-0, node-3" for each fault, joined by "; ".
std::string DescribeNodeNicFaults(const NodeNicResult& result);

// The links of a node-NIC verdict: `slow` (other slow links, each with its ratio) merged with
// the named nodes' links (a link in both keeps the larger ratio), slowest first (ties in link
// order). The named nodes are appended to *nodes. Empty when both are empty.
std::vector<std::pair<double, falcon::v1::Link>> NodeNicVerdictLinks(
    const std::vector<std::pair<double, falcon::v1::Link>>& slow, const NodeNicResult& nic,
    std::vector<std::string>* nodes);

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_NODE_NIC_H_
