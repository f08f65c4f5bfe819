// falcon_plan: offline mitigation planning (`./falcon plan ...`). See plan_commands.h for the
// subcommands, flags and output. Exit status: 0 ok, 1 bad input or unreadable file (the message
// names the flag, field or file position), 2 usage error (missing or unknown subcommand); --help
// prints the usage and every flag and exits 0.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/help/flags_help.h"
#include "cli/plan/plan_commands.h"
#include "common/flag_checks.h"
#include "common/logging/logging.h"

// s2
ABSL_FLAG(std::string, times, "", "s2: seconds per micro-batch of each DP group, t1,t2,...");
ABSL_FLAG(int64_t, micro_batches, 0, "s2: micro-batches per global batch (M)");
ABSL_FLAG(int64_t, multiple, 1,
          "s2: every group's micro-batches are a multiple of this (PP size "
          "under 1F1B)");
ABSL_FLAG(std::string, exclude, "", "s2: DP indices that get no micro-batches, i,j,...");
ABSL_FLAG(std::string, current, "",
          "s2: the plan in force m1,m2,... (speedup baseline; default "
          "the even split)");
// s3
ABSL_FLAG(std::string, layout, "", "s3: layout file, CSV (rank,node,dp,pp,tp) or JSON");
ABSL_FLAG(std::string, slow_links, "", "s3: slow links SRC-DST[:SLOWDOWN],... (default 2.0)");
ABSL_FLAG(std::string, slow_ranks, "", "s3: slow ranks RANK[:SLOWDOWN],... (default 1.5)");
ABSL_FLAG(std::string, stage_compute_s, "1",
          "s3: forward+backward seconds per micro-batch, one value or one per stage");
ABSL_FLAG(double, p2p_s, 0.02,
          "s3, layer-split: healthy PP p2p seconds per micro-batch per boundary");
ABSL_FLAG(double, allreduce_s, 1.0,
          "s3, layer-split: healthy DP all-reduce seconds per stage (layer-split: per iteration)");
ABSL_FLAG(int64_t, replica_micro_batches, 8, "s3: micro-batches per DP replica per iteration");
ABSL_FLAG(int64_t, state_bytes, 0, "s3: bytes of state per rank moved when its stage changes");
ABSL_FLAG(int64_t, dp_state_bytes, 0,
          "s3: bytes of state per rank moved when only its dp index changes");
// layer-split (also --micro-batches, --multiple, --p2p-s, --allreduce-s)
ABSL_FLAG(int, dp, 0, "layer-split: DP replicas (D)");
ABSL_FLAG(int, pp, 0, "layer-split: pipeline stages (P)");
ABSL_FLAG(int, layers, 0, "layer-split: with one --layer-compute-s value, this many layers of it");
ABSL_FLAG(std::string, layer_compute_s, "",
          "layer-split: forward+backward seconds per micro-batch of each layer, c1,c2,...");
ABSL_FLAG(std::string, slow_cells, "",
          "layer-split: compute slowdowns of (dp, stage) cells, DP.STAGE:SLOWDOWN,...");
ABSL_FLAG(int, min_layers, 1, "layer-split: fewest layers a stage holds");
ABSL_FLAG(std::string, layer_memory_bytes, "",
          "layer-split: memory a stage needs per layer it holds, one value or one per layer");
ABSL_FLAG(int64_t, stage_memory_bytes, 0, "layer-split: most memory per stage (0: no limit)");
// escalate
ABSL_FLAG(std::string, trace, "", "escalate: trace CSV (iteration,iteration_time_s,cause)");
ABSL_FLAG(double, healthy_s, 0, "escalate: healthy iteration seconds (0: from the trace)");
ABSL_FLAG(double, s2_cost_iterations, 5, "escalate: S2 cost in units of t_slow - t_healthy");
ABSL_FLAG(double, s3_cost_s, 60, "escalate: S3 cost in seconds");
ABSL_FLAG(double, checkpoint_write_s, 295, "escalate: S4 checkpoint write seconds");
ABSL_FLAG(double, checkpoint_read_s, 295, "escalate: S4 checkpoint read seconds");
ABSL_FLAG(double, restart_s, 10, "escalate: S4 restart seconds");
ABSL_FLAG(std::string, disable, "", "escalate: levels to disable, any of s2,s3,s4");
// all
ABSL_FLAG(bool, json, false, "print JSON instead of a table");
ABSL_FLAG(int64_t, max_input_bytes, int64_t{64} << 20,
          "s3, escalate: refuse a --layout or --trace file larger than this, in [1, 2^36]");

namespace {

constexpr char kUsage[] =
    "falcon_plan: plan Falcon's mitigations offline.\n"
    "  falcon_plan s2 --times t1,t2,... --micro-batches M [--multiple q] [--json]\n"
    "  falcon_plan s3 --layout FILE [--slow-links a-b[:x],...] [--slow-ranks r[:x],...] [--json]\n"
    "  falcon_plan layer-split --dp D --pp P --layer-compute-s c1,... --micro-batches M\n"
    "      [--slow-cells d.s:x,...] [--multiple q] [--json]\n"
    "  falcon_plan escalate --trace FILE [--json]\n"
    "Run with --help for every flag.";

int Finish(const absl::StatusOr<std::string>& out) {
  if (!out.ok()) {
    std::fprintf(stderr, "falcon_plan: error: %s\n", std::string(out.status().message()).c_str());
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc, argv)) {  // Abseil's own --help exits 1.
    std::fputs(falcon::cli::help::FlagsHelp(
                   absl::StrCat(kUsage, "\n", falcon::common::logging::kLoggingUsage),
                   "falcon_plan_main.cc", /*dashes=*/true)
                   .c_str(),
               stdout);
    return 0;
  }
  // The documented spelling uses dashes (--slow-links); the pre-unification names stay aliases.
  std::vector<std::string> rewritten = falcon::cli::help::NormalizeFlagNames(
      argc, argv,
      {{"microbatches", "micro_batches"}, {"replica_microbatches", "replica_micro_batches"}});
  std::vector<char*> raw;
  for (std::string& a : rewritten) raw.push_back(a.data());
  const std::vector<char*> args = absl::ParseCommandLine(static_cast<int>(raw.size()), raw.data());
  falcon::common::logging::InitLogging(argv[0]);
  if (args.size() > 2) {
    std::fprintf(stderr, "falcon_plan: unexpected argument '%s' (one subcommand, then flags)\n%s\n",
                 args[2], kUsage);
    return 2;
  }
  if (args.size() != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const int64_t max_input_bytes = absl::GetFlag(FLAGS_max_input_bytes);
  if (absl::Status s =
          falcon::common::CheckIntegerIn(max_input_bytes, "--max-input-bytes", 1, int64_t{1} << 36);
      !s.ok()) {
    return Finish(s);
  }
  const std::string command = args[1];
  const bool json = absl::GetFlag(FLAGS_json);
  if (command == "s2") {
    falcon::cli::plan::S2Request r;
    r.times = absl::GetFlag(FLAGS_times);
    r.micro_batches = absl::GetFlag(FLAGS_micro_batches);
    r.multiple = absl::GetFlag(FLAGS_multiple);
    r.exclude = absl::GetFlag(FLAGS_exclude);
    r.current = absl::GetFlag(FLAGS_current);
    r.json = json;
    return Finish(falcon::cli::plan::RunS2(r));
  }
  if (command == "layer-split") {
    falcon::cli::plan::LayerSplitRequest r;
    r.dp = absl::GetFlag(FLAGS_dp);
    r.pp = absl::GetFlag(FLAGS_pp);
    r.layers = absl::GetFlag(FLAGS_layers);
    r.layer_compute_s = absl::GetFlag(FLAGS_layer_compute_s);
    r.slow_cells = absl::GetFlag(FLAGS_slow_cells);
    r.micro_batches = absl::GetFlag(FLAGS_micro_batches);
    r.multiple = absl::GetFlag(FLAGS_multiple);
    r.p2p_s = absl::GetFlag(FLAGS_p2p_s);
    r.allreduce_s = absl::GetFlag(FLAGS_allreduce_s);
    r.min_layers = absl::GetFlag(FLAGS_min_layers);
    r.layer_memory_bytes = absl::GetFlag(FLAGS_layer_memory_bytes);
    r.stage_memory_bytes = absl::GetFlag(FLAGS_stage_memory_bytes);
    r.json = json;
    return Finish(falcon::cli::plan::RunLayerSplit(r));
  }
  if (command == "s3") {
    falcon::cli::plan::S3Request r;
    r.layout_path = absl::GetFlag(FLAGS_layout);
    r.max_input_bytes = static_cast<uint64_t>(max_input_bytes);
    r.slow_links = absl::GetFlag(FLAGS_slow_links);
    r.slow_ranks = absl::GetFlag(FLAGS_slow_ranks);
    r.stage_compute_s = absl::GetFlag(FLAGS_stage_compute_s);
    r.p2p_s = absl::GetFlag(FLAGS_p2p_s);
    r.allreduce_s = absl::GetFlag(FLAGS_allreduce_s);
    r.replica_micro_batches = absl::GetFlag(FLAGS_replica_micro_batches);
    r.state_bytes = absl::GetFlag(FLAGS_state_bytes);
    r.dp_state_bytes = absl::GetFlag(FLAGS_dp_state_bytes);
    r.json = json;
    return Finish(falcon::cli::plan::RunS3(r));
  }
  if (command == "escalate") {
    falcon::cli::plan::EscalateRequest r;
    r.trace_path = absl::GetFlag(FLAGS_trace);
    r.max_input_bytes = static_cast<uint64_t>(max_input_bytes);
    r.healthy_s = absl::GetFlag(FLAGS_healthy_s);
    r.s2_cost_iterations = absl::GetFlag(FLAGS_s2_cost_iterations);
    r.s3_cost_s = absl::GetFlag(FLAGS_s3_cost_s);
    r.checkpoint_write_s = absl::GetFlag(FLAGS_checkpoint_write_s);
    r.checkpoint_read_s = absl::GetFlag(FLAGS_checkpoint_read_s);
    r.restart_s = absl::GetFlag(FLAGS_restart_s);
    r.disable = absl::GetFlag(FLAGS_disable);
    r.json = json;
    return Finish(falcon::cli::plan::RunEscalate(r));
  }
  std::fprintf(stderr, "falcon_plan: unknown subcommand '%s'\n%s\n", command.c_str(), kUsage);
  return 2;
}
