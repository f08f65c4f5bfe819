// Infers each communicator's role (DP / PP / TP / WORLD) when the trainer gave no hint, from
// group sizes, node placement, the job's layout sizes when known, and observed traffic
// (point-to-point vs collective ops). Without framework hooks, groups can only be
// classified from communicator size and traffic patterns (docs/algorithms.md#role-inference). Pure
// functions.
#ifndef FALCON_CONTROLLER_REGISTRY_ROLE_INFERENCE_H_
#define FALCON_CONTROLLER_REGISTRY_ROLE_INFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::registry {

struct CommTraffic {
  uint64_t p2p_ops = 0;         // SEND / RECV records seen.
  uint64_t collective_ops = 0;  // Every other op kind.
};

struct CommForInference {
  uint64_t comm_id = 0;
  falcon::v1::CommKind hint = falcon::v1::COMM_KIND_UNKNOWN;
  std::vector<uint32_t> members;
  std::vector<std::string> member_nodes;  // Node of each member ("" when unknown).
  CommTraffic traffic;
};

struct LayoutSizes {
  uint32_t dp = 0;  // 0 = unknown.
  uint32_t pp = 0;
  uint32_t tp = 0;
};

struct RoleInferenceResult {
  std::vector<falcon::v1::CommKind> kinds;  // One per input comm, in input order.
  LayoutSizes layout;                       // Hinted sizes, completed from the roles.
};

// What one comm's role depends on besides the comm itself.
struct RoleContext {
  uint32_t world_size = 0;
  LayoutSizes hinted;
  bool any_spans_nodes = false;  // Some comm of the job has members on two or more nodes.
};

// Whether every member's node is known and the same one.
bool OnOneNode(const std::vector<std::string>& member_nodes);
// Whether the known nodes of the members are two or more.
bool SpansNodes(const std::vector<std::string>& member_nodes);

// The role of one comm (rules of InferRoles). `one_node`: OnOneNode of its members.
falcon::v1::CommKind InferRole(falcon::v1::CommKind hint, uint32_t size, const CommTraffic& traffic,
                               bool one_node, const RoleContext& context);

// `hinted` completed from the largest DP and TP comm sizes (0: none) as InferRoles does.
LayoutSizes CompleteLayout(uint32_t world_size, LayoutSizes hinted, uint32_t largest_dp,
                           uint32_t largest_tp);

// Rules, in order, for a comm without a hint (UNSPECIFIED or UNKNOWN):
//  1. every rank of the job                                  -> WORLD
//  2. mostly point-to-point traffic                          -> PP
//  3. size equals the hinted TP size and sits on one node    -> TP
//  4. size equals the hinted DP size                         -> DP
//  5. size equals the hinted PP size                         -> PP
//  6. otherwise (collective traffic, or none seen yet):
//     a. on one node while some other comm spans nodes       -> TP
//     b. more than 2 members, or collective traffic seen     -> DP
//     c. a pair with no traffic yet                          -> UNKNOWN (decided later)
// Layout sizes not hinted are filled from the inferred roles (size of the DP/TP comms; PP as
// world / (dp * tp) when that divides).
RoleInferenceResult InferRoles(uint32_t world_size, const std::vector<CommForInference>& comms,
                               const LayoutSizes& hinted);

}  // namespace falcon::controller::registry

#endif  // FALCON_CONTROLLER_REGISTRY_ROLE_INFERENCE_H_
