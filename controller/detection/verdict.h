// The verdict of a validation (docs/algorithms.md#verdict): GEMM times per rank and link times per
// communicator, each compared with its median. A rank whose GEMM takes more than
// (1 + gemm_slow_ratio) x the median is a compute culprit; a link whose time per byte exceeds
// (1 + link_slow_ratio) x the median of its communicator's links (with those of the reference
// pair planned for it, PendingTask.compare_with_comm) is a communication culprit.
// When both kinds are found, the larger relative slowdown decides the cause. The measured links
// of each communicator then go through pairwise localization
// (docs/algorithms.md#pairwise-localization; a pair slow in either direction is slow): a rank
// all of whose (at least 2) links are slow is named as the slow end (its NIC or its node) rather
// than as separate links. A slow link whose reverse direction was measured fine is one-way (the
// reason says so, with the reverse's ratio).
// Given the ranks' nodes, the measured links are also judged across communicators, by node pair
// (node_nic.h, docs/algorithms.md#node-nic-faults): a node whose NIC explains every slow link is
// named (Verdict.nodes), with its links to other nodes as the evidence, and its links' ratios take
// part in the cause (a NIC fault can hide from every communicator's median). Pure.
#ifndef FALCON_CONTROLLER_DETECTION_VERDICT_H_
#define FALCON_CONTROLLER_DETECTION_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "controller/detection/node_nic.h"
#include "controller/store/records.pb.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::detection {

struct VerdictOptions {
  double gemm_slow_ratio = 0.10;  // (0, 10]. Default 0.10 (the paper's 10%).
  double link_slow_ratio = 0.10;  // (0, 10].
};

struct Verdict {
  falcon::v1::Cause cause = falcon::v1::CAUSE_UNKNOWN;
  std::vector<uint32_t> ranks;          // Compute culprits, slowest first.
  std::vector<falcon::v1::Link> links;  // Communication culprits, slowest first.
  // Communication: ranks every measured link of which is slow (pairwise localization), their
  // links being in `links`. Ascending.
  std::vector<uint32_t> link_endpoints;
  // Communication: those of `links` whose reverse direction was measured and is not slow (a
  // one-way fault), in the order of `links`. Empty when `nodes` is not.
  std::vector<falcon::v1::Link> one_way_links;
  // Communication: nodes whose NIC is slow (a node NIC fault), ascending; `links` then holds every
  // measured link between them and other nodes (all slow) and any other slow link (each touching
  // one of them). Event.nodes.
  std::vector<std::string> nodes;
  double ratio = 0;  // Slowest culprit / median; 0 when none.
  int gemm_ranks_measured = 0;
  int links_measured = 0;
  std::string reason;  // For humans: what was measured and found.
};

// `tasks` are the event's validation tasks and `results` every result received for them; results
// with an error, or for tasks not in `tasks`, are ignored. `nodes`: each rank's node (empty: node
// NIC faults are not looked for).
Verdict JudgeValidation(const std::vector<falcon::controller::v1::PendingTask>& tasks,
                        const std::vector<falcon::v1::ValidationResult>& results,
                        const VerdictOptions& options, const RankNodes& nodes = {});

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_VERDICT_H_
