// The subcommands of falcon_plan (`./falcon plan`), as functions of their flag values that return
// the text to print, so tests can run them without a process. main() only parses flags.
//
//   s2        --times t1,t2,... --micro-batches M [--multiple q] [--exclude i,j]
//             [--current m1,m2,...] [--json]
//             JSON: {"m":[...],"makespan":x,"predicted_speedup":y,"baseline_makespan":b,
//                    "spread":s}; times in seconds. The speedup compares the makespan with the
//             plan in force on the same groups: --current (0 = a group it leaves out) or, by
//             default, the even split over all groups (--exclude applies to the new plan only).
//   s3        --layout FILE [--slow-links a-b[:x],...] [--slow-ranks r[:x],...] [cost model
//             flags] [--json]
//             JSON: {"layout":[...],"moved_ranks":[...],"predicted_iteration_time_s":{"before",
//                    "after"},"predicted_speedup":y,"bytes_to_move":n,...,"notes":[...]}.
//   layer-split --dp D --pp P --layer-compute-s c1,c2,... (or one value with --layers L)
//             --micro-batches M [--multiple q] [--slow-cells d.s:x,...] [--p2p-s h]
//             [--allreduce-s a] [--min-layers k] [--layer-memory-bytes b1,... or one value
//             --stage-memory-bytes B] [--json]
//             Jointly re-partitions layers and re-balances micro-batches (exact,
//             docs/algorithms.md#layer-split-planner) and compares with S2 alone, both against
//             the even split with even micro-batches. JSON: {"replicas":[{"dp","first_layer",
//             "micro_batches","pipeline_s"}],"predicted_iteration_time_s":{"healthy","slowed",
//             "s2_only","planned"},"recoverable":{"s2_only","planned"},"front_points"}.
//   escalate  --trace FILE [--healthy-s t] [cost flags] [--disable s2,s3,s4] [--json]
//             Replays the trace through the escalation state machine and prints each decision
//             with its reason.
//
// Every function returns kInvalidArgument naming the flag or the file position for bad input
// (also a directory given as --layout or --trace), kNotFound/kPermissionDenied for a file it
// cannot read, and kResourceExhausted naming --max-input-bytes for a file larger than that.
// JSON output replaces bytes that are not UTF-8 (in node names) with U+FFFD.
#ifndef FALCON_CLI_PLAN_PLAN_COMMANDS_H_
#define FALCON_CLI_PLAN_PLAN_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/plan/topology_planner.h"
#include "common/text_file.h"

namespace falcon::cli::plan {

struct S2Request {
  std::string times;          // --times: seconds per micro-batch per DP group, comma-separated.
  int64_t micro_batches = 0;  // --micro-batches: M, micro-batches per global batch.
  int64_t multiple = 1;       // --multiple: q (PP size under 1F1B).
  std::string exclude;        // --exclude: DP indices to give no micro-batches.
  std::string current;        // --current: the plan in force, for the speedup; empty = even split.
  bool json = false;
};

struct S3Request {
  std::string layout_path;                                      // --layout
  uint64_t max_input_bytes = common::kDefaultMaxTextFileBytes;  // --max-input-bytes
  std::string slow_links;             // --slow-links: a-b or a-b:slowdown (default 2.0)
  std::string slow_ranks;             // --slow-ranks: r or r:slowdown (default 1.5)
  std::string stage_compute_s;        // --stage-compute-s: one value or one per stage
  double p2p_s = 0.02;                // --p2p-s
  double allreduce_s = 1.0;           // --allreduce-s
  int64_t replica_micro_batches = 8;  // --replica-micro-batches
  int64_t state_bytes = 0;            // --state-bytes: per rank, moved on a stage change
  int64_t dp_state_bytes = 0;         // --dp-state-bytes: per rank, moved on a dp change
  bool json = false;
};

struct EscalateRequest {
  std::string trace_path;                                       // --trace
  uint64_t max_input_bytes = common::kDefaultMaxTextFileBytes;  // --max-input-bytes
  double healthy_s = 0;             // --healthy-s: 0 = mean of the healthy rows before an event
  double s2_cost_iterations = 5;    // --s2-cost-iterations
  double s3_cost_s = 60;            // --s3-cost-s
  double checkpoint_write_s = 295;  // --checkpoint-write-s
  double checkpoint_read_s = 295;   // --checkpoint-read-s
  double restart_s = 10;            // --restart-s
  std::string disable;              // --disable: any of s2,s3,s4
  bool json = false;
};

struct LayerSplitRequest {
  int dp = 0;                      // --dp
  int pp = 0;                      // --pp
  int layers = 0;                  // --layers: with one --layer-compute-s value, L layers of it
  std::string layer_compute_s;     // --layer-compute-s: forward+backward seconds per micro-batch
  std::string slow_cells;          // --slow-cells: d.s:slowdown,...
  int64_t micro_batches = 0;       // --micro-batches: M
  int64_t multiple = 1;            // --multiple: q
  double p2p_s = 0;                // --p2p-s: per boundary and micro-batch
  double allreduce_s = 0;          // --allreduce-s: once per iteration
  int min_layers = 1;              // --min-layers
  std::string layer_memory_bytes;  // --layer-memory-bytes: one value or one per layer
  int64_t stage_memory_bytes = 0;  // --stage-memory-bytes: 0 = no limit
  bool json = false;
};

absl::StatusOr<std::string> RunS2(const S2Request& request);
absl::StatusOr<std::string> RunLayerSplit(const LayerSplitRequest& request);
absl::StatusOr<std::string> RunS3(const S3Request& request);
absl::StatusOr<std::string> RunEscalate(const EscalateRequest& request);

// Flag value parsers (exposed for tests). Errors name `flag` and the item index.
absl::StatusOr<std::vector<double>> ParseDoubles(absl::string_view text, absl::string_view flag);
absl::StatusOr<std::vector<int64_t>> ParseInts(absl::string_view text, absl::string_view flag);
absl::StatusOr<std::vector<analysis::plan::SlowLink>> ParseSlowLinks(absl::string_view text);
absl::StatusOr<std::vector<analysis::plan::SlowRank>> ParseSlowRanks(absl::string_view text);

}  // namespace falcon::cli::plan

#endif  // FALCON_CLI_PLAN_PLAN_COMMANDS_H_
