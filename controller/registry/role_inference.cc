#include "controller/registry/role_inference.h"

#include <algorithm>
#include <set>

namespace falcon::controller::registry {
namespace {

using falcon::v1::CommKind;

bool OnOneNode(const CommForInference& c) {
  std::set<std::string> nodes;
  for (const std::string& n : c.member_nodes) {
    if (n.empty()) return false;  // Unknown placement: do not claim one node.
    nodes.insert(n);
  }
  return nodes.size() == 1;
}

bool Hinted(CommKind k) {
  return k != falcon::v1::COMM_KIND_UNSPECIFIED && k != falcon::v1::COMM_KIND_UNKNOWN;
}

}  // namespace

RoleInferenceResult InferRoles(uint32_t world_size, const std::vector<CommForInference>& comms,
                               const LayoutSizes& hinted) {
  RoleInferenceResult result;
  result.layout = hinted;
  bool any_spans_nodes = false;
  for (const CommForInference& c : comms) {
    std::set<std::string> nodes(c.member_nodes.begin(), c.member_nodes.end());
    nodes.erase("");
    if (nodes.size() > 1) any_spans_nodes = true;
  }
  for (const CommForInference& c : comms) {
    const uint32_t size = static_cast<uint32_t>(c.members.size());
    CommKind kind = falcon::v1::COMM_KIND_UNKNOWN;
    if (Hinted(c.hint)) {
      kind = c.hint;
    } else if (size == world_size && world_size > 0) {
      kind = falcon::v1::COMM_KIND_WORLD;
    } else if (c.traffic.p2p_ops > c.traffic.collective_ops) {
      kind = falcon::v1::COMM_KIND_PP;
    } else if (hinted.tp > 1 && size == hinted.tp && OnOneNode(c)) {
      kind = falcon::v1::COMM_KIND_TP;
    } else if (hinted.dp > 1 && size == hinted.dp) {
      kind = falcon::v1::COMM_KIND_DP;
    } else if (hinted.pp > 1 && size == hinted.pp) {
      kind = falcon::v1::COMM_KIND_PP;
    } else if (OnOneNode(c) && any_spans_nodes && size > 1) {
      kind = falcon::v1::COMM_KIND_TP;
    } else if (size > 2 || c.traffic.collective_ops > 0) {
      kind = falcon::v1::COMM_KIND_DP;
    }
    result.kinds.push_back(kind);
  }
  // Complete the layout from the roles.
  auto size_of = [&](CommKind k) -> uint32_t {
    uint32_t best = 0;
    for (size_t i = 0; i < comms.size(); ++i) {
      if (result.kinds[i] == k) best = std::max<uint32_t>(best, comms[i].members.size());
    }
    return best;
  };
  if (result.layout.dp == 0) result.layout.dp = size_of(falcon::v1::COMM_KIND_DP);
  if (result.layout.tp == 0) {
    uint32_t tp = size_of(falcon::v1::COMM_KIND_TP);
    // With DP groups known and no TP group, TP is 1.
    result.layout.tp = tp > 0 ? tp : (result.layout.dp > 0 ? 1 : 0);
  }
  if (result.layout.pp == 0 && result.layout.dp > 0 && result.layout.tp > 0 &&
      world_size % (result.layout.dp * result.layout.tp) == 0) {
    result.layout.pp = world_size / (result.layout.dp * result.layout.tp);
  }
  return result;
}

}  // namespace falcon::controller::registry
