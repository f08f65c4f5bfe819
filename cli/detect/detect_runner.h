// The analysis behind falcon_detect (docs/algorithms.md#offline-detection): BOCD's MAP
// segmentation of every series, then (unless raw) the segment starts whose change-point
// probability reaches min_probability go to verification; for ByteDance traces also cross-rank
// blame per step. Output as JSON:
//   {"min_probability": m,
//    "series": [{"name": ..., "change_points": [{"index": i, "kind": k, "ratio": r,
//                                                "probability": p}, ...],
//                "below_min_probability": [<change points as above>]}, ...],
//    "blame": [{"step": s, "rank": r, "cause": "compute|communication", "ratio": x}, ...],
//    "imbalance": {"steps": n, "stages": n, "ranks": n, "stage_compute_s": [...],
//                  "stage_imbalance": null | {"stage", "ranks", "ratio", "slowest_share",
//                                             "shed_fraction"},
//                  "jitter": null | {"median_spread", "ranks_sometimes_slow", "ranks",
//                                    "max_slow_share"},
//                  "persistent_stragglers": [{"rank", "stage", "slow_share",
//                                             "slow_iterations", "iterations", "first_step",
//                                             "last_step", "ratio"}, ...],
//                  "findings": [<operator's text>, ...]}   (or {"error": why not analysed})}
// ("blame" and "imbalance" (analysis/detect/imbalance.h, slow at 1 + min_change) only for
// ByteDance input; "min_probability" and "below_min_probability" not with raw:
// the changes verification keeps when every segment start is verified whose probability is below
// min_probability, i.e. what min_probability 0 would add). kind is "raw" with raw (index 0
// included, ratio 1 and probability 1 for it), else "slowdown", "recovery" or "speedup". ratio =
// mean after / mean before (null when the mean before is 0); probability = the largest lagged
// change-point probability while the change was recent (analysis/detect/bocd.h), with the online
// detector's lag (10).
// Pairwise input (InputFormat::kPairwise) gives instead (analysis/detect/pairwise.h, slow at
// 1 + min_change):
//   {"pairwise": {"pairs": n, "nodes": n, "slow_pairs": n, "reference_bandwidth": x,
//                 "fast_pairs": n, "noise_sigma": x, "noise_sigmas": k,
//                 "slow_ratio": r, "findings": [{"kind": "node|link|ambiguous|untested", "node":
//                 ..., "slow_pairs": [[a, b], ...], "link": [a, b], "candidates": [...],
//                 "deciding_pairs": [[a, b], ...], "ratio": x, "text": ...}, ...]}}
// (node and slow_pairs for kind node; link for link and ambiguous; candidates and
// deciding_pairs for ambiguous; node, pairs and deciding_pairs for untested; ratio = reference /
// bandwidth, the reference the upper quartile; text as an operator reads it).
#ifndef FALCON_CLI_DETECT_DETECT_RUNNER_H_
#define FALCON_CLI_DETECT_DETECT_RUNNER_H_

#include <string>

#include "absl/status/statusor.h"
#include "analysis/detect/bocd.h"
#include "analysis/detect/online_detector.h"
#include "cli/detect/readers.h"
#include "nlohmann/json.hpp"

namespace falcon::cli::detect {

struct DetectOptions {
  bool raw = false;  // MAP segmentation only, no verification.
  // Segment starts whose change-point probability is below this are not verified (nor
  // reported): the online detector's change_probability, so the tool reports what Falcon would
  // propose. [0, 1]; 0 verifies every segment start. Ignored with raw.
  double min_probability = analysis::detect::DetectorThresholds().change_probability;
  analysis::detect::NormalGammaPrior prior;  // Default m=0, k=1, a=1, b=1 (ocp / TCPDBench).
  double expected_run_length = 250;          // lambda; hazard = 1 / lambda. > 1.
  bool zscore = true;                        // Standardize each series first.
  double min_change = 0.10;                  // Verification: min relative change of the mean.
  int min_gap = 10;                          // Verification: min observations between changes.
};

// kInvalidArgument: an empty series, a negative value when verifying (times), or bad options;
// the message names the series and the value's origin (line, step or raw index).
absl::StatusOr<nlohmann::json> RunDetect(const DetectInput& input, const DetectOptions& options);

// A short human-readable report of RunDetect's JSON.
std::string FormatReport(const nlohmann::json& result);

}  // namespace falcon::cli::detect

#endif  // FALCON_CLI_DETECT_DETECT_RUNNER_H_
