// The verdict of a validation (docs/algorithms.md#verdict): GEMM times per rank and link times per
// communicator, each compared with its median. A rank whose GEMM takes more than
// (1 + gemm_slow_ratio) x the median is a compute culprit; a link whose time per byte exceeds
// (1 + link_slow_ratio) x the median of its communicator's links (with those of the reference
// pair planned for it, PendingTask.compare_with_comm) is a communication culprit, unless its
// extra time per byte over its communicator's fine links is under a tenth of the worst slow
// link's (noise beside it; the reason lists it). When both kinds are found, the larger relative
// slowdown decides the cause. The measured links of each communicator then go through pairwise
// localization (docs/algorithms.md#pairwise-localization; a pair slow in either direction is
// slow): a rank all of whose (at least 2) links are slow is named as the slow end (its NIC or its
// node) rather than as separate links. A slow link whose reverse direction was measured fine is
// one-way (the reason says so, with the reverse's ratio). Given the ranks' nodes, the measured
// links are also judged across communicators, by node pair (node_nic.h,
// docs/algorithms.md#node-nic-faults): a node whose NIC explains every slow link is named
// (Verdict.nodes), with its links to other nodes as the evidence, and its links' ratios take part
// in the cause (a NIC fault can hide from every communicator's median). Pure.
#ifndef FALCON_CONTROLLER_DETECTION_VERDICT_H_
#define FALCON_CONTROLLER_DETECTION_VERDICT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
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
  // Each culprit's ratio, parallel to `ranks` / `links` where the verdict measured them (empty
  // otherwise): a verdict that loses culprits (another event's, Localizer) takes its ratio from
  // the culprits left.
  std::vector<double> rank_ratios;
  std::vector<double> link_ratios;
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

// The slowdown a culprit found by validation must explain (docs/algorithms.md#verdict).
struct SlowdownToExplain {
  double ratio = 1.0;   // x the healthy level.
  bool latest = false;  // From the iterations just before validation (else the event's mean).
};

// `event_ratio`: the event's slowdown (its first onset series' mean while slow over the healthy
// level); `latest_seconds`: that series' latest iteration times before validation ran (seconds,
// any order; EventRecord.latest_slow_seconds); `healthy_seconds`: its healthy level; `min_ratio`:
// the verification ratio. A culprit's bound holds iteration by iteration and a straggler's
// strength varies, so the slowdown when validation ran counts: the latest times' median over the
// healthy level, where that is below `event_ratio` and still a slowdown by `min_ratio` (a passing
// load gone by then leaves `event_ratio` to explain). `event_ratio` when there are no latest times
// or `healthy_seconds` <= 0.
SlowdownToExplain SlowdownValidationMustExplain(double event_ratio,
                                                absl::Span<const double> latest_seconds,
                                                double healthy_seconds, double min_ratio);

// Whether a culprit measured `culprit_ratio` x its peers can explain a slowdown of `slowdown` x:
// a part slowed x r slows a synchronous iteration by at most x r, with a fifth of the excess
// left to measurement noise: r >= 1 + 0.8 (s - 1). Always true for `slowdown` <= 1.
bool CanExplain(double culprit_ratio, double slowdown);

// Keeps the culprits i of `culprits` for which keep(i) holds, in order, and their ratios with them
// when `ratios` is parallel (the same size); a `ratios` that is not is cleared. The one filter of
// a verdict's culprit lists (Verdict ranks / rank_ratios, links / link_ratios). keep(i) is called
// once per culprit, in order, before either list changes.
template <typename T, typename Keep>
void KeepCulpritsIf(std::vector<T>* culprits, std::vector<double>* ratios, const Keep& keep) {
  const bool parallel = ratios->size() == culprits->size();
  std::vector<T> kept;
  std::vector<double> kept_ratios;
  for (size_t i = 0; i < culprits->size(); ++i) {
    if (!keep(i)) continue;
    kept.push_back((*culprits)[i]);
    if (parallel) kept_ratios.push_back((*ratios)[i]);
  }
  *culprits = std::move(kept);
  *ratios = std::move(kept_ratios);
}

// Drops from `v` the culprits after the slowest that cannot explain `slowdown` on their own
// (CanExplain): a rank whose GEMM reads 1.12x beside a culprit at 1.9x while the job slowed x1.7
// is noise of a shared CPU, not a second fail-slow, and naming it would plan S2 for a healthy
// group (docs/algorithms.md#verdict). Needs each culprit's ratio (rank_ratios / link_ratios
// parallel to ranks / links; otherwise that list is kept); a node NIC verdict's links are its
// evidence and are all kept. one_way_links follows `links`. Returns what was dropped, for the
// reason ("rank 2 (1.12x), link 3->4 (1.05x)"; empty: nothing).
std::string DropCulpritsTooWeakToExplain(double slowdown, Verdict* v);

}  // namespace falcon::controller::detection

#endif  // FALCON_CONTROLLER_DETECTION_VERDICT_H_
