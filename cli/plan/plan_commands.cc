#include "cli/plan/plan_commands.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/plan/escalation.h"
#include "analysis/plan/layer_split_planner.h"
#include "analysis/plan/micro_batch_solver.h"
#include "cli/plan/layout_io.h"
#include "cli/plan/trace_io.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"

namespace falcon::cli::plan {
namespace {

using analysis::plan::Cause;
using analysis::plan::EscalationStep;
using analysis::plan::Strategy;
using Json = nlohmann::ordered_json;

// Node names come from the layout file and need not be UTF-8 (dump() would throw on them):
// bad bytes become U+FFFD.
std::string Dump(const Json& out) {
  return out.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

// Splits a comma-separated flag value; an empty value gives no items.
std::vector<std::string> Items(absl::string_view text) {
  std::vector<std::string> items;
  if (absl::StripAsciiWhitespace(text).empty()) return items;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    items.push_back(std::string(absl::StripAsciiWhitespace(item)));
  }
  return items;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::StatusOr<absl::Duration> SecondsFlag(double value, absl::string_view flag) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": must be a finite number of seconds >= 0, got ", value));
  }
  return absl::Seconds(value);
}

std::string StrategyCode(Strategy s) { return absl::StrCat("S", static_cast<int>(s)); }

}  // namespace

absl::StatusOr<std::vector<double>> ParseDoubles(absl::string_view text, absl::string_view flag) {
  std::vector<double> out;
  const std::vector<std::string> items = Items(text);
  for (size_t i = 0; i < items.size(); ++i) {
    double v;
    if (!absl::SimpleAtod(items[i], &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "[", i, "]: '", items[i], "' is not a number"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> ParseInts(absl::string_view text, absl::string_view flag) {
  std::vector<int64_t> out;
  const std::vector<std::string> items = Items(text);
  for (size_t i = 0; i < items.size(); ++i) {
    int64_t v;
    if (!absl::SimpleAtoi(items[i], &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "[", i, "]: '", items[i], "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<analysis::plan::SlowLink>> ParseSlowLinks(absl::string_view text) {
  std::vector<analysis::plan::SlowLink> links;
  const std::vector<std::string> items = Items(text);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where = absl::StrCat("--slow-links[", i, "]: '", items[i], "'");
    std::vector<std::string> parts = absl::StrSplit(items[i], ':');
    analysis::plan::SlowLink link;
    std::vector<std::string> ends = absl::StrSplit(parts[0], '-');
    if (parts.size() > 2 || ends.size() != 2 || !absl::SimpleAtoi(ends[0], &link.src_rank) ||
        !absl::SimpleAtoi(ends[1], &link.dst_rank)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not SRC-DST or SRC-DST:SLOWDOWN (ranks)"));
    }
    if (parts.size() == 2 && !absl::SimpleAtod(parts[1], &link.slowdown)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": slowdown is not a number"));
    }
    links.push_back(link);
  }
  return links;
}

absl::StatusOr<std::vector<analysis::plan::SlowRank>> ParseSlowRanks(absl::string_view text) {
  std::vector<analysis::plan::SlowRank> ranks;
  const std::vector<std::string> items = Items(text);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string where = absl::StrCat("--slow-ranks[", i, "]: '", items[i], "'");
    std::vector<std::string> parts = absl::StrSplit(items[i], ':');
    analysis::plan::SlowRank rank;
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &rank.rank)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is not RANK or RANK:SLOWDOWN"));
    }
    if (parts.size() == 2 && !absl::SimpleAtod(parts[1], &rank.slowdown)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": slowdown is not a number"));
    }
    ranks.push_back(rank);
  }
  return ranks;
}

namespace {

// `s` with a library field name that starts its message replaced by the flag that set it (the
// first of `names`, {field, flag}, that matches).
absl::Status WithFlagNames(const absl::Status& s,
                           std::initializer_list<std::pair<const char*, const char*>> names) {
  std::string m(s.message());
  for (const auto& [field, flag] : names) {
    if (absl::StartsWith(m, field)) {
      m = absl::StrCat(flag, m.substr(std::string(field).size()));
      break;
    }
  }
  return absl::Status(s.code(), m);
}

}  // namespace

absl::StatusOr<std::string> RunLayerSplit(const LayerSplitRequest& request) {
  using analysis::plan::LayerSplitPlan;
  using analysis::plan::StageSplit;
  analysis::plan::LayerSplitProblem p;
  p.dp = request.dp;
  p.pp = request.pp;
  if (p.dp < 1 || p.dp > analysis::plan::kMaxSplitReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dp: ", p.dp, " is not in [1, ", analysis::plan::kMaxSplitReplicas, "]"));
  }
  if (p.pp < 1 || p.pp > analysis::plan::kMaxSplitStages) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pp: ", p.pp, " is not in [1, ", analysis::plan::kMaxSplitStages, "]"));
  }
  absl::StatusOr<std::vector<double>> compute =
      ParseDoubles(request.layer_compute_s, "--layer-compute-s");
  if (!compute.ok()) return compute.status();
  if (compute->size() == 1 && request.layers > 0) {
    if (request.layers > analysis::plan::kMaxSplitLayers) {
      return absl::InvalidArgumentError(absl::StrCat("--layers: ", request.layers, " is above ",
                                                     analysis::plan::kMaxSplitLayers));
    }
    compute->assign(request.layers, compute->front());
  } else if (request.layers > 0 && static_cast<int>(compute->size()) != request.layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--layers: ", request.layers, " but --layer-compute-s has ", compute->size(), " values"));
  }
  for (size_t l = 0; l < compute->size(); ++l) {
    const double c = (*compute)[l];
    if (!(c >= 0 && c <= 1000)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--layer-compute-s[", l, "]: ", c, " is not in [0, 1000] seconds"));
    }
    p.layer_compute.push_back(absl::Seconds(c));
  }
  p.slowdowns.assign(static_cast<size_t>(p.dp) * p.pp, 1.0);
  int index = 0;
  for (absl::string_view item : absl::StrSplit(request.slow_cells, ',', absl::SkipEmpty())) {
    const std::string field = absl::StrCat("--slow-cells[", index++, "]");
    std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    std::vector<absl::string_view> cell =
        absl::StrSplit(parts.empty() ? absl::string_view() : parts[0], '.');
    int d = 0, s = 0;
    double x = 0;
    if (parts.size() != 2 || cell.size() != 2 || !absl::SimpleAtoi(cell[0], &d) ||
        !absl::SimpleAtoi(cell[1], &s) || !absl::SimpleAtod(parts[1], &x)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", item, "' is not DP.STAGE:SLOWDOWN"));
    }
    if (d < 0 || d >= p.dp || s < 0 || s >= p.pp) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": cell ", d, ".", s, " is outside dp ", p.dp, " x pp ", p.pp));
    }
    if (!(x >= 0.01 && x <= 1000)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": slowdown ", x, " is not in [0.01, 1000]"));
    }
    p.slowdowns[static_cast<size_t>(d) * p.pp + s] = x;
  }
  if (!(request.p2p_s >= 0 && request.p2p_s <= 1000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--p2p-s: ", request.p2p_s, " is not in [0, 1000]"));
  }
  if (!(request.allreduce_s >= 0 && request.allreduce_s <= 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--allreduce-s: ", request.allreduce_s, " is not in [0, 1e6]"));
  }
  if (p.pp > 1 && request.p2p_s > 0) p.boundary_p2p.assign(p.pp - 1, absl::Seconds(request.p2p_s));
  p.allreduce = absl::Seconds(request.allreduce_s);
  p.global_micro_batches = request.micro_batches;
  p.multiple = request.multiple;
  p.min_layers_per_stage = request.min_layers;
  absl::StatusOr<std::vector<int64_t>> memory =
      ParseInts(request.layer_memory_bytes, "--layer-memory-bytes");
  if (!memory.ok()) return memory.status();
  if (memory->size() == 1) memory->assign(p.layer_compute.size(), memory->front());
  p.layer_memory_bytes = *memory;
  p.stage_memory_limit_bytes = request.stage_memory_bytes;
  // Library field names → flag names in messages.
  auto flagged = [](const absl::Status& s) {
    return WithFlagNames(s, {{"layer_compute", "--layer-compute-s"},
                             {"global_micro_batches", "--micro-batches"},
                             {"multiple", "--multiple"},
                             {"min_layers_per_stage", "--min-layers"},
                             {"layer_memory_bytes", "--layer-memory-bytes"},
                             {"stage_memory_limit_bytes", "--stage-memory-bytes"},
                             {"boundary_p2p", "--p2p-s"}});
  };
  if (absl::Status s = analysis::plan::ValidateLayerSplitProblem(p); !s.ok()) return flagged(s);
  const int layers = static_cast<int>(p.layer_compute.size());
  absl::StatusOr<StageSplit> even = analysis::plan::EvenStageSplit(layers, p.pp);
  if (!even.ok()) return flagged(even.status());
  const std::vector<StageSplit> evens(p.dp, *even);
  analysis::plan::MicroBatchProblem counts;
  counts.micro_batch_times.assign(p.dp, absl::Seconds(1));
  counts.global_micro_batches = p.global_micro_batches;
  counts.multiple = p.multiple;
  absl::StatusOr<analysis::plan::MicroBatchSplit> even_counts =
      analysis::plan::EvenMicroBatches(counts);
  if (!even_counts.ok()) return flagged(even_counts.status());
  absl::StatusOr<LayerSplitPlan> joint = analysis::plan::PlanLayerSplit(p);
  if (!joint.ok()) return flagged(joint.status());
  absl::StatusOr<LayerSplitPlan> s2 = analysis::plan::PlanMicroBatchesForSplits(p, evens);
  if (!s2.ok()) return flagged(s2.status());
  absl::StatusOr<analysis::plan::RecoverableCeiling> with_split =
      analysis::plan::CeilingOf(p, evens, even_counts->micro_batches, *joint);
  if (!with_split.ok()) return flagged(with_split.status());
  absl::StatusOr<analysis::plan::RecoverableCeiling> s2_only =
      analysis::plan::CeilingOf(p, evens, even_counts->micro_batches, *s2);
  if (!s2_only.ok()) return flagged(s2_only.status());
  const double healthy = absl::ToDoubleSeconds(with_split->healthy);
  const double slowed = absl::ToDoubleSeconds(with_split->slowed);
  const double s2_time = absl::ToDoubleSeconds(s2_only->planned);
  const double planned = absl::ToDoubleSeconds(with_split->planned);
  if (request.json) {
    Json out;
    out["replicas"] = Json::array();
    for (size_t d = 0; d < joint->replicas.size(); ++d) {
      const auto& r = joint->replicas[d];
      out["replicas"].push_back({{"dp", d},
                                 {"first_layer", r.first_layer},
                                 {"micro_batches", r.micro_batches},
                                 {"pipeline_s", absl::ToDoubleSeconds(r.pipeline)}});
    }
    out["predicted_iteration_time_s"] = {
        {"healthy", healthy}, {"slowed", slowed}, {"s2_only", s2_time}, {"planned", planned}};
    out["recoverable"] = {{"s2_only", s2_only->recoverable}, {"planned", with_split->recoverable}};
    out["front_points"] = joint->front_points;
    return out.dump() + "\n";
  }
  std::string text = absl::StrFormat(
      "predicted iteration: healthy %.4f s, slowed %.4f s, S2 alone %.4f s (recovers %.2f of the "
      "slowdown), re-partition + S2 %.4f s (recovers %.2f)\n%4s  %-24s %8s %12s\n",
      healthy, slowed, s2_time, s2_only->recoverable, planned, with_split->recoverable, "dp",
      "first layer of each stage", "m", "pipeline s");
  for (size_t d = 0; d < joint->replicas.size(); ++d) {
    const auto& r = joint->replicas[d];
    absl::StrAppendFormat(&text, "%4d  %-24s %8d %12.4f%s\n", d, absl::StrJoin(r.first_layer, ","),
                          r.micro_batches, absl::ToDoubleSeconds(r.pipeline),
                          r.first_layer == *even ? "" : "  (re-partitioned)");
  }
  return text;
}

absl::StatusOr<std::string> RunS2(const S2Request& request) {
  absl::StatusOr<std::vector<double>> seconds = ParseDoubles(request.times, "--times");
  if (!seconds.ok()) return seconds.status();
  if (seconds->empty()) return absl::InvalidArgumentError("--times: required (D = 0 groups)");
  absl::StatusOr<std::vector<absl::Duration>> times =
      analysis::plan::MicroBatchTimesFromSeconds(*seconds, "--times");
  if (!times.ok()) return times.status();
  analysis::plan::MicroBatchProblem problem;
  problem.micro_batch_times = *times;
  problem.global_micro_batches = request.micro_batches;
  problem.multiple = request.multiple;
  absl::StatusOr<std::vector<int64_t>> exclude = ParseInts(request.exclude, "--exclude");
  if (!exclude.ok()) return exclude.status();
  if (!exclude->empty()) {
    problem.excluded.assign(times->size(), false);
    for (size_t i = 0; i < exclude->size(); ++i) {
      const int64_t dp = (*exclude)[i];
      if (dp < 0 || dp >= static_cast<int64_t>(times->size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--exclude[", i, "]: ", dp, " is not a DP index in [0, ", times->size(), ")"));
      }
      problem.excluded[dp] = true;
    }
  }
  // Library field names → flag names in messages.
  auto flagged = [](const absl::Status& s) {
    return WithFlagNames(s, {{"micro_batch_times", "--times"},
                             {"global_micro_batches", "--micro-batches"},
                             {"multiple", "--multiple"},
                             {"excluded", "--exclude"},
                             {"micro_batches", "--current"}});
  };
  absl::StatusOr<analysis::plan::MicroBatchSplit> split =
      analysis::plan::SolveMicroBatches(problem);
  if (!split.ok()) return flagged(split.status());
  // The baseline is the plan in force, on the same (slow) groups: --exclude only applies to the
  // new plan. By default every group is in the even split; a --current entry of 0 marks a group
  // that the plan in force already leaves out.
  analysis::plan::MicroBatchProblem in_force = problem;
  in_force.excluded.clear();
  absl::StatusOr<analysis::plan::MicroBatchSplit> baseline;
  std::string baseline_name = "even split";
  if (request.current.empty()) {
    baseline = analysis::plan::EvenMicroBatches(in_force);
    if (!baseline.ok() && !problem.excluded.empty()) {
      // M is too small to give every group q micro-batches, so the plan in force cannot have
      // been the even split over all groups; fall back to the one over the groups kept.
      baseline = analysis::plan::EvenMicroBatches(problem);
      baseline_name = "even split over the groups kept (pass --current for the plan in force)";
    }
  } else {
    absl::StatusOr<std::vector<int64_t>> current = ParseInts(request.current, "--current");
    if (!current.ok()) return current.status();
    if (current->size() != times->size()) {
      return absl::InvalidArgumentError(absl::StrCat("--current: has ", current->size(),
                                                     " entries, want one per DP group (",
                                                     times->size(), ")"));
    }
    if (std::find(current->begin(), current->end(), 0) != current->end()) {
      in_force.excluded.assign(times->size(), false);
      for (size_t i = 0; i < current->size(); ++i) in_force.excluded[i] = (*current)[i] == 0;
    }
    baseline = analysis::plan::EvaluateMicroBatches(in_force, *current);
    baseline_name = "current plan";
  }
  if (!baseline.ok()) return flagged(baseline.status());
  const double speedup = Seconds(baseline->makespan) / Seconds(split->makespan);
  if (request.json) {
    Json out;
    out["m"] = split->micro_batches;
    out["makespan"] = Seconds(split->makespan);
    out["predicted_speedup"] = speedup;
    out["baseline_makespan"] = Seconds(baseline->makespan);
    out["spread"] = Seconds(split->spread);
    return Dump(out);
  }
  std::string text = absl::StrFormat("S2 plan: %d DP groups, M = %d, q = %d\n%4s %14s %14s %12s\n",
                                     times->size(), request.micro_batches, request.multiple, "dp",
                                     "s/micro-batch", "micro-batches", "finish (s)");
  for (size_t i = 0; i < times->size(); ++i) {
    const int64_t m = split->micro_batches[i];
    absl::StrAppendFormat(&text, "%4d %14.4f %14d %12.4f\n", i, (*seconds)[i], m,
                          static_cast<double>(m) * (*seconds)[i]);
  }
  absl::StrAppendFormat(&text,
                        "makespan %.4f s, spread %.4f s; %s %.4f s: predicted speedup %.3fx\n",
                        Seconds(split->makespan), Seconds(split->spread), baseline_name,
                        Seconds(baseline->makespan), speedup);
  return text;
}

absl::StatusOr<std::string> RunS3(const S3Request& request) {
  if (request.layout_path.empty()) return absl::InvalidArgumentError("--layout: required");
  absl::StatusOr<std::string> text =
      common::ReadTextFile(request.layout_path, request.max_input_bytes, "--max-input-bytes");
  if (!text.ok()) return Annotate(text.status(), "--layout: ");
  absl::StatusOr<analysis::plan::Layout> layout = ParseLayout(*text, request.layout_path);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<std::vector<analysis::plan::SlowLink>> links = ParseSlowLinks(request.slow_links);
  if (!links.ok()) return links.status();
  absl::StatusOr<std::vector<analysis::plan::SlowRank>> ranks = ParseSlowRanks(request.slow_ranks);
  if (!ranks.ok()) return ranks.status();
  analysis::plan::TopologyPlannerOptions options;
  analysis::plan::TopologyCostModel& model = options.model;
  if (!request.stage_compute_s.empty()) {
    absl::StatusOr<std::vector<double>> compute =
        ParseDoubles(request.stage_compute_s, "--stage-compute-s");
    if (!compute.ok()) return compute.status();
    model.stage_compute.clear();
    for (size_t i = 0; i < compute->size(); ++i) {
      absl::StatusOr<absl::Duration> d =
          SecondsFlag((*compute)[i], absl::StrCat("--stage-compute-s[", i, "]"));
      if (!d.ok()) return d.status();
      model.stage_compute.push_back(*d);
    }
  }
  absl::StatusOr<absl::Duration> p2p = SecondsFlag(request.p2p_s, "--p2p-s");
  if (!p2p.ok()) return p2p.status();
  absl::StatusOr<absl::Duration> allreduce = SecondsFlag(request.allreduce_s, "--allreduce-s");
  if (!allreduce.ok()) return allreduce.status();
  model.p2p = *p2p;
  model.allreduce = *allreduce;
  model.micro_batches = request.replica_micro_batches;
  model.stage_state_bytes_per_rank = request.state_bytes;
  model.dp_state_bytes_per_rank = request.dp_state_bytes;
  absl::StatusOr<analysis::plan::TopologyPlan> plan =
      PlanTopology(*layout, *links, *ranks, options);
  if (!plan.ok()) {
    // Name the flags behind the library's fields.
    std::string m(plan.status().message());
    for (auto [field, flag] : {std::pair{"slow_links", "--slow-links"},
                               {"slow_ranks", "--slow-ranks"},
                               {"micro_batches", "--replica-micro-batches"},
                               {"stage_compute", "--stage-compute-s"},
                               {"p2p", "--p2p-s"},
                               {"allreduce", "--allreduce-s"},
                               {"stage_state_bytes_per_rank", "--state-bytes"},
                               {"dp_state_bytes_per_rank", "--dp-state-bytes"}}) {
      if (absl::StartsWith(m, field)) {
        m = absl::StrCat(flag, m.substr(std::string(field).size()));
        break;
      }
    }
    return absl::Status(plan.status().code(), m);
  }
  const double before = Seconds(plan->before.iteration), after = Seconds(plan->after.iteration);
  const double speedup = after > 0 ? before / after : 1.0;
  if (request.json) {
    Json out;
    out["layout"] = LayoutToJson(plan->layout);
    out["moved_ranks"] = plan->moved_ranks;
    out["predicted_iteration_time_s"] = {{"before", before}, {"after", after}};
    out["predicted_speedup"] = speedup;
    out["bytes_to_move"] = plan->bytes_to_move;
    out["ranks_changing_stage"] = plan->ranks_changing_stage;
    out["slow_links_in_dp"] = {{"before", plan->slow_links_in_dp_before},
                               {"after", plan->slow_links_in_dp_after}};
    out["slow_links_in_pp"] = {{"before", plan->slow_links_in_pp_before},
                               {"after", plan->slow_links_in_pp_after}};
    out["straggler_stages"] = {{"before", plan->straggler_stages_before},
                               {"after", plan->straggler_stages_after}};
    out["notes"] = plan->notes;
    return Dump(out);
  }
  std::set<std::string> nodes;
  for (const analysis::plan::RankPlacement& r : layout->ranks()) nodes.insert(r.node);
  std::string out = absl::StrFormat(
      "S3 plan: %d ranks (dp %d x pp %d x tp %d) on %d nodes\n"
      "predicted iteration time %.4f s -> %.4f s (speedup %.3fx)\n"
      "slow links carrying DP traffic %d -> %d, PP traffic %d -> %d; stages with stragglers "
      "%d -> %d\n"
      "%d ranks move (%d change stage), %d bytes of state to move\n",
      layout->world_size(), layout->dp_size(), layout->pp_size(), layout->tp_size(), nodes.size(),
      before, after, speedup, plan->slow_links_in_dp_before, plan->slow_links_in_dp_after,
      plan->slow_links_in_pp_before, plan->slow_links_in_pp_after, plan->straggler_stages_before,
      plan->straggler_stages_after, plan->moved_ranks.size(), plan->ranks_changing_stage,
      plan->bytes_to_move);
  if (!plan->moved_ranks.empty()) {
    absl::StrAppendFormat(&out, "%6s %-16s %-16s %-16s\n", "rank", "node", "old dp,pp,tp",
                          "new dp,pp,tp");
    for (int32_t r : plan->moved_ranks) {
      const analysis::plan::RankPlacement& a = layout->at(r);
      const analysis::plan::RankPlacement& b = plan->layout.at(r);
      absl::StrAppendFormat(&out, "%6d %-16s %-16s %-16s\n", r, a.node,
                            absl::StrCat(a.dp, ",", a.pp, ",", a.tp),
                            absl::StrCat(b.dp, ",", b.pp, ",", b.tp));
    }
  }
  for (const std::string& note : plan->notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

absl::StatusOr<std::string> RunEscalate(const EscalateRequest& request) {
  if (request.trace_path.empty()) return absl::InvalidArgumentError("--trace: required");
  absl::StatusOr<std::string> text =
      common::ReadTextFile(request.trace_path, request.max_input_bytes, "--max-input-bytes");
  if (!text.ok()) return Annotate(text.status(), "--trace: ");
  absl::StatusOr<std::vector<TraceRow>> rows = ParseTrace(*text, request.trace_path);
  if (!rows.ok()) return rows.status();

  analysis::plan::EscalationOptions options;
  options.s2_cost_iterations = request.s2_cost_iterations;
  const std::pair<const char*, double> durations[] = {
      {"--s3-cost-s", request.s3_cost_s},
      {"--checkpoint-write-s", request.checkpoint_write_s},
      {"--checkpoint-read-s", request.checkpoint_read_s},
      {"--restart-s", request.restart_s}};
  absl::Duration* targets[] = {&options.s3_cost, &options.checkpoint_write,
                               &options.checkpoint_read, &options.restart};
  for (size_t i = 0; i < 4; ++i) {
    absl::StatusOr<absl::Duration> d = SecondsFlag(durations[i].second, durations[i].first);
    if (!d.ok()) return d.status();
    *targets[i] = *d;
  }
  const std::vector<std::string> disable = Items(request.disable);
  for (size_t i = 0; i < disable.size(); ++i) {
    const std::string level = absl::AsciiStrToLower(disable[i]);
    if (level == "s2") {
      options.s2_enabled = false;
    } else if (level == "s3") {
      options.s3_enabled = false;
    } else if (level == "s4") {
      options.s4_enabled = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--disable[", i, "]: '", disable[i], "' is not one of s2, s3, s4"));
    }
  }
  if (absl::Status s = options.Validate(); !s.ok()) {
    return Annotate(s, "escalation settings: ");
  }
  if (request.healthy_s < 0 || !std::isfinite(request.healthy_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--healthy-s: must be a finite number of seconds >= 0, got ", request.healthy_s));
  }

  common::FakeClock clock(absl::UnixEpoch());
  absl::StatusOr<analysis::plan::Escalation> escalation =
      analysis::plan::Escalation::Create(options, clock);
  if (!escalation.ok()) return escalation.status();
  analysis::plan::Escalation& e = *escalation;
  std::vector<EscalationStep> steps;
  std::vector<std::string> notes;
  absl::Duration healthy_sum;
  int healthy_count = 0, events = 0;
  // After S4 ends an event, the recording still shows its cause until the trace moves on; those
  // rows are skipped. (A bool and a Cause rather than std::optional: GCC 12 -O2 warns falsely.)
  bool handled = false;
  Cause handled_cause = Cause::kUnknown;
  auto add = [&](absl::StatusOr<std::vector<EscalationStep>> s) -> absl::Status {
    if (!s.ok()) return s.status();
    steps.insert(steps.end(), s->begin(), s->end());
    return absl::OkStatus();
  };
  for (const TraceRow& row : *rows) {
    clock.Advance(row.iteration_time);
    const std::string where = absl::StrCat(request.trace_path, ":", row.line);
    if (handled && row.cause != handled_cause) handled = false;
    if (e.active() && row.cause != e.cause()) {
      if (absl::Status s = add(e.OnCleared(row.iteration)); !s.ok()) return s;
    }
    if (!row.cause.has_value()) {
      healthy_sum += row.iteration_time;
      ++healthy_count;
      continue;
    }
    if (handled) continue;
    if (!e.active()) {
      absl::Duration healthy = absl::Seconds(request.healthy_s);
      if (request.healthy_s == 0) {
        if (healthy_count == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(where,
                           ": an event starts before any healthy iteration; pass "
                           "--healthy-s"));
        }
        healthy = healthy_sum / healthy_count;
      }
      if (row.iteration_time <= healthy) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: column iteration_time_s: the event's first iteration (%.4f s) is not slower than "
            "healthy (%.4f s)",
            where, Seconds(row.iteration_time), Seconds(healthy)));
      }
      ++events;
      if (absl::Status s =
              add(e.StartEvent(*row.cause, healthy, row.iteration_time, row.iteration));
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = add(e.OnIteration(row.iteration, row.iteration_time)); !s.ok()) return s;
    if (!e.active()) {
      handled = true;
      handled_cause = *row.cause;
    }
  }
  if (e.active()) {
    std::vector<std::string> in_force;
    for (Strategy s : e.in_force())
      in_force.push_back(std::string(analysis::plan::StrategyName(s)));
    notes.push_back(
        absl::StrFormat("the trace ends with the %s event active: lost %.2fs, in force: %s",
                        analysis::plan::CauseName(e.cause()), Seconds(e.lost()),
                        in_force.empty() ? "S1 ignore" : absl::StrJoin(in_force, ", ")));
  }
  const absl::Time start = absl::UnixEpoch();
  if (request.json) {
    Json out;
    out["events"] = events;
    out["steps"] = Json::array();
    for (const EscalationStep& s : steps) {
      out["steps"].push_back({{"iteration", s.iteration},
                              {"time_s", Seconds(s.time - start)},
                              {"action", std::string(analysis::plan::ActionName(s.action))},
                              {"strategy", StrategyCode(s.strategy)},
                              {"lost_s", Seconds(s.lost)},
                              {"cost_s", Seconds(s.cost)},
                              {"reason", s.reason}});
    }
    out["notes"] = notes;
    return Dump(out);
  }
  std::string out =
      absl::StrFormat("%d event(s), %d decision(s)\n%9s %10s  %-6s %-22s %s\n", events,
                      steps.size(), "iteration", "time (s)", "action", "strategy", "reason");
  for (const EscalationStep& s : steps) {
    absl::StrAppendFormat(&out, "%9d %10.2f  %-6s %-22s %s\n", s.iteration, Seconds(s.time - start),
                          analysis::plan::ActionName(s.action),
                          analysis::plan::StrategyName(s.strategy), s.reason);
  }
  for (const std::string& note : notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

}  // namespace falcon::cli::plan
