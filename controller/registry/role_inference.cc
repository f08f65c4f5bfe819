#include "controller/registry/role_inference.h"

#include <algorithm>

namespace falcon::controller::registry {
namespace {

using falcon::v1::CommKind;

bool Hinted(CommKind k) {
  return k != falcon::v1::COMM_KIND_UNSPECIFIED && k != falcon::v1::COMM_KIND_UNKNOWN;
}

}  // namespace

bool OnOneNode(const std::vector<std::string>& member_nodes) {
  if (member_nodes.empty()) return false;
  for (const std::string& n : member_nodes) {
    if (n.empty() || n != member_nodes.front()) return false;  // Unknown placement: not one node.
  }
  return true;
}

bool SpansNodes(const std::vector<std::string>& member_nodes) {
  const std::string* first = nullptr;
  for (const std::string& n : member_nodes) {
    if (n.empty()) continue;
    if (first == nullptr) {
      first = &n;
    } else if (n != *first) {
      return true;
    }
  }
  return false;
}

CommKind InferRole(CommKind hint, uint32_t size, const CommTraffic& traffic, bool one_node,
                   const RoleContext& context) {
  const LayoutSizes& hinted = context.hinted;
  if (Hinted(hint)) return hint;
  if (size == context.world_size && context.world_size > 0) return falcon::v1::COMM_KIND_WORLD;
  if (traffic.p2p_ops > traffic.collective_ops) return falcon::v1::COMM_KIND_PP;
  if (hinted.tp > 1 && size == hinted.tp && one_node) return falcon::v1::COMM_KIND_TP;
  if (hinted.dp > 1 && size == hinted.dp) return falcon::v1::COMM_KIND_DP;
  if (hinted.pp > 1 && size == hinted.pp) return falcon::v1::COMM_KIND_PP;
  if (one_node && context.any_spans_nodes && size > 1) return falcon::v1::COMM_KIND_TP;
  if (size > 2 || traffic.collective_ops > 0) return falcon::v1::COMM_KIND_DP;
  return falcon::v1::COMM_KIND_UNKNOWN;
}

LayoutSizes CompleteLayout(uint32_t world_size, LayoutSizes hinted, uint32_t largest_dp,
                           uint32_t largest_tp) {
  LayoutSizes layout = hinted;
  if (layout.dp == 0) layout.dp = largest_dp;
  if (layout.tp == 0) {
    // With DP communicators known and no TP communicator, TP is 1.
    layout.tp = largest_tp > 0 ? largest_tp : (layout.dp > 0 ? 1 : 0);
  }
  if (layout.pp == 0 && layout.dp > 0 && layout.tp > 0 &&
      world_size % (layout.dp * layout.tp) == 0) {
    layout.pp = world_size / (layout.dp * layout.tp);
  }
  return layout;
}

RoleInferenceResult InferRoles(uint32_t world_size, const std::vector<CommForInference>& comms,
                               const LayoutSizes& hinted) {
  RoleContext context;
  context.world_size = world_size;
  context.hinted = hinted;
  for (const CommForInference& c : comms) {
    context.any_spans_nodes = context.any_spans_nodes || SpansNodes(c.member_nodes);
  }
  RoleInferenceResult result;
  uint32_t largest_dp = 0, largest_tp = 0;
  for (const CommForInference& c : comms) {
    const uint32_t size = static_cast<uint32_t>(c.members.size());
    const CommKind kind = InferRole(c.hint, size, c.traffic, OnOneNode(c.member_nodes), context);
    if (kind == falcon::v1::COMM_KIND_DP) largest_dp = std::max(largest_dp, size);
    if (kind == falcon::v1::COMM_KIND_TP) largest_tp = std::max(largest_tp, size);
    result.kinds.push_back(kind);
  }
  result.layout = CompleteLayout(world_size, hinted, largest_dp, largest_tp);
  return result;
}

}  // namespace falcon::controller::registry
