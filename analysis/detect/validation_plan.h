// Validation passes for communication (docs/algorithms.md#validation-passes): testing every pair of
// ranks is O(N^2); instead the links a collective really uses are split into passes of
// non-overlapping point-to-point transfers (each rank sends or receives at most once per pass), so
// all links of a pass run at once and the number of passes is O(1) whatever the group size:
// - ring of N ranks (links r[i] -> r[i+1 mod N]): even N, 2 passes (even -> next odd, then
//   odd -> next even); odd N, the same plus a 3rd pass for the closing link r[N-1] -> r[0];
// - binary tree (links child -> parent): left children at even depth, right children at even
//   depth, left children at odd depth, right children at odd depth: at most 4 passes.
// Every transfer has the same size, so a slow link simply takes longer than the others. A transfer
// moves its bytes one way (src -> dst, then a 1-byte ack back), so a pass measures one direction;
// Reversed() gives the passes of the other, and with both a one-way fault is found with its
// direction.
#ifndef FALCON_ANALYSIS_DETECT_VALIDATION_PLAN_H_
#define FALCON_ANALYSIS_DETECT_VALIDATION_PLAN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace falcon::analysis::detect {

struct LinkPair {
  int64_t src = 0;  // Sending rank.
  int64_t dst = 0;  // Receiving rank.
  friend bool operator==(const LinkPair& a, const LinkPair& b) {
    return a.src == b.src && a.dst == b.dst;
  }
};

struct PassPlan {
  std::vector<std::vector<LinkPair>> passes;  // Non-empty passes, in order.
};

// `ring`: ranks in ring order, distinct, >= 0. One rank: no links, no passes.
// kInvalidArgument naming a negative or repeated rank, or an empty ring.
absl::StatusOr<PassPlan> PlanRingPasses(absl::Span<const int64_t> ring);

struct TreeEdge {
  int64_t child = 0;
  int64_t parent = 0;
  bool left = true;  // The parent's left (true) or right child.
};

// Edges of one binary tree over distinct ranks. kInvalidArgument naming the rank: a rank with
// two parents, a parent with two left (or right) children, a self-loop, no single root, or a
// cycle. No edges: no passes.
absl::StatusOr<PassPlan> PlanTreePasses(absl::Span<const TreeEdge> edges);

// The same passes with every link turned around (dst -> src): still non-overlapping.
PassPlan Reversed(const PassPlan& plan);

// The same links with every pass split so that no two links of a pass cross between the same two
// nodes in opposite directions (a -> b beside c -> d with node(a) = node(d) != node(b) = node(c)).
// A transfer's 1-byte acks flow against its data: beside a transfer the other way between the
// same nodes, they queue behind that one's data, and a one-way slow path then slows the reverse
// link of the pass too (seen: a ring pass 1 -> 2, 3 -> 0 over two nodes, capped one way). Greedy,
// in link order: a link goes into the first part of its pass it does not oppose, so a ring's pass
// becomes at most two. `node_of(rank)`: the rank's node, "" when unknown (opposes nothing).
PassPlan SeparateOpposingLinks(const PassPlan& plan,
                               const std::function<std::string(int64_t)>& node_of);

// The binary tree in heap layout over `ranks`: ranks[i]'s children are ranks[2i+1] (left) and
// ranks[2i+2] (right).
std::vector<TreeEdge> HeapTree(absl::Span<const int64_t> ranks);

// Rounds of a validation's tasks (docs/algorithms.md#validation-rounds): `footprints[i]` are the
// nodes task i runs on (any strings naming them). Returns each task's round, 1-based: the first
// round none of whose tasks uses any of its nodes (first fit in task order). Tasks of one round
// share no node (no GPU, NIC or host), so they can run at the same time without disturbing each
// other's measurements; rounds run one after the other. A task without nodes gets a round of its
// own. Costs O(tasks x rounds x nodes per task).
std::vector<uint32_t> AssignRounds(const std::vector<std::vector<std::string>>& footprints);

struct LinkMeasurement {
  int64_t src = 0;
  int64_t dst = 0;
  absl::Duration time;  // Time to move the test message over the link, > 0.
};

struct SlowLink {
  int64_t src = 0;
  int64_t dst = 0;
  int pass = 0;         // Index in the plan.
  absl::Duration time;  // Mean of its measurements.
  double ratio = 0;     // time / median over all links of the plan.
};

// Links whose mean measured time exceeds (1 + slow_ratio) x the median over the plan's links,
// slowest first. Repeated measurements of a link are averaged.
// kInvalidArgument: a plan link without measurements or a measurement of a link not in the plan
// (both named), a time <= 0, or slow_ratio outside (0, 10].
absl::StatusOr<std::vector<SlowLink>> FindSlowLinks(const PassPlan& plan,
                                                    absl::Span<const LinkMeasurement> measured,
                                                    double slow_ratio = 0.10);

}  // namespace falcon::analysis::detect

#endif  // FALCON_ANALYSIS_DETECT_VALIDATION_PLAN_H_
