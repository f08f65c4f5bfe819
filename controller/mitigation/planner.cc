#include "controller/mitigation/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/plan/layer_split_planner.h"
#include "analysis/plan/micro_batch_solver.h"
#include "analysis/plan/pipeline_cost.h"
#include "analysis/plan/topology_planner.h"

namespace falcon::controller::mitigation {
namespace {

std::string Secs(absl::Duration d) { return absl::StrFormat("%.3f s", absl::ToDoubleSeconds(d)); }

// The least compute fraction ComputeFraction gives: an iteration is never modelled as all fixed
// cost.
constexpr double kMinComputeFraction = 0.05;

// Per-stage compute of one micro-batch, from the healthy iteration time (see planner.h).
absl::Duration StageCompute(absl::Duration healthy, int64_t m, int pp) {
  return healthy / static_cast<double>(std::max<int64_t>(1, m + pp - 1));
}

int64_t PerReplica(const JobShape& shape) {
  return std::max<int64_t>(1, shape.global_micro_batches / shape.layout.dp_size());
}

// Slowdown of each (dp, pp) cell for the culprit ranks (`s`) and the compute culprits of the
// job's other events (each its own stage slowdown).
std::vector<double> CellSlowdowns(const JobShape& shape, const Culprit& culprit, double s,
                                  const std::vector<Culprit>& others) {
  const analysis::plan::Layout& l = shape.layout;
  std::vector<double> cell(static_cast<size_t>(l.dp_size()) * l.pp_size(), 1.0);
  auto mark = [&](const std::vector<uint32_t>& ranks, double slowdown) {
    for (uint32_t r : ranks) {
      if (static_cast<int>(r) >= l.world_size()) continue;
      const analysis::plan::RankPlacement& p = l.at(static_cast<int>(r));
      double& c = cell[static_cast<size_t>(p.dp) * l.pp_size() + p.pp];
      c = std::max(c, slowdown);
    }
  };
  mark(culprit.ranks, s);
  for (const Culprit& o : others) {
    if (o.cause != falcon::v1::CAUSE_COMPUTE) continue;
    mark(o.ranks, CulpritStageSlowdown(o, PerReplica(shape), l.pp_size()));
  }
  return cell;
}

absl::StatusOr<absl::Duration> Predict(const JobShape& shape, const std::vector<double>& cells,
                                       const std::vector<uint32_t>& m, absl::Duration c) {
  const analysis::plan::Layout& l = shape.layout;
  analysis::plan::JobTiming t;
  for (int d = 0; d < l.dp_size(); ++d) {
    analysis::plan::PipelineTiming rep;
    for (int p = 0; p < l.pp_size(); ++p) {
      rep.stage_compute.push_back(c * cells[static_cast<size_t>(d) * l.pp_size() + p]);
    }
    rep.boundary_p2p.assign(l.pp_size() - 1, absl::ZeroDuration());
    rep.micro_batches = m[d];
    t.replicas.push_back(std::move(rep));
  }
  t.stage_allreduce.assign(l.pp_size(), absl::ZeroDuration());
  absl::StatusOr<analysis::plan::IterationEstimate> e = analysis::plan::EstimateIteration(t);
  if (!e.ok()) return e.status();
  return e->iteration;
}

// Stage counts -> the first block of each stage, and back.
analysis::plan::StageSplit FirstBlocks(const common::StageBlocks& stages) {
  analysis::plan::StageSplit first;
  int at = 0;
  for (int b : stages) {
    first.push_back(at);
    at += b;
  }
  return first;
}

common::StageBlocks BlocksOf(const analysis::plan::StageSplit& first, int blocks) {
  common::StageBlocks out;
  for (size_t s = 0; s < first.size(); ++s) {
    out.push_back((s + 1 < first.size() ? first[s + 1] : blocks) - first[s]);
  }
  return out;
}

// Blocks of one pipeline whose stage differs between two splits of it.
int BlocksMoved(const analysis::plan::StageSplit& a, const analysis::plan::StageSplit& b,
                int blocks) {
  int moved = 0;
  size_t sa = 0, sb = 0;
  for (int block = 0; block < blocks; ++block) {
    while (sa + 1 < a.size() && a[sa + 1] <= block) ++sa;
    while (sb + 1 < b.size() && b[sb + 1] <= block) ++sb;
    if (sa != sb) ++moved;
  }
  return moved;
}

// The job in the layer split planner's terms (planner.h): the healthy iteration, t, split into
// the pipeline's share f·t (ComputeFraction), (m + P − 1) 1F1B slots of compute spread over the
// `blocks` blocks, P·f·t / ((m + P − 1)·blocks) each and slowed by the cells' slowdowns, and the
// rest (1 − f)·t (the DP all-reduce, the optimizer step, scheduling) once per iteration, which
// neither a slowdown, a split nor the micro-batch counts change; q = 1; the plan `shape` is in
// (its split when it has `blocks` blocks, else even; shape.micro_batches) as the baseline. A
// stage given more blocks takes longer in proportion (its slot is all compute): with the rest
// put on each slot instead, the culprit's pipeline peer looked lighter than it ran and S2L gave
// its group too many micro-batches (demo: predicted 0.338 s, measured 0.350 s).
struct SplitModel {
  analysis::plan::LayerSplitProblem problem;
  std::vector<analysis::plan::StageSplit> base_splits;
  std::vector<int64_t> base_micro_batches;
};

absl::StatusOr<SplitModel> SplitModelOf(const JobShape& shape, const std::vector<double>& cells,
                                        absl::Duration healthy, int blocks,
                                        double compute_fraction) {
  const analysis::plan::Layout& l = shape.layout;
  const int D = l.dp_size(), P = l.pp_size();
  const double f = std::clamp(compute_fraction, kMinComputeFraction, 1.0);
  const absl::Duration c = StageCompute(healthy * f, PerReplica(shape), P);
  SplitModel out;
  analysis::plan::LayerSplitProblem& p = out.problem;
  p.dp = D;
  p.pp = P;
  p.layer_compute.assign(std::max(blocks, 0), c * P / std::max(blocks, 1));
  p.allreduce = healthy * (1.0 - f);
  p.slowdowns = cells;
  p.global_micro_batches = shape.global_micro_batches;
  p.multiple = 1;
  if (absl::Status st = analysis::plan::ValidateLayerSplitProblem(p); !st.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("layer split model: ", st.message()));
  }
  const std::vector<common::StageBlocks> split =
      blocks == shape.pipeline_blocks ? SplitInForce(shape) : std::vector<common::StageBlocks>{};
  absl::StatusOr<analysis::plan::StageSplit> even = analysis::plan::EvenStageSplit(blocks, P);
  if (!even.ok()) return absl::FailedPreconditionError(even.status().message());
  for (int d = 0; d < D; ++d) {
    out.base_splits.push_back(static_cast<int>(split.size()) == D ? FirstBlocks(split[d]) : *even);
  }
  out.base_micro_batches.assign(shape.micro_batches.begin(), shape.micro_batches.end());
  return out;
}

// The ceiling from the model's healthy, slowed and planned iteration times, calibrated to the
// measured healthy iteration time (the model's times scaled by healthy / model_healthy).
falcon::v1::PlanCeiling CeilingProto(falcon::v1::Strategy strategy, absl::Duration model_healthy,
                                     absl::Duration model_slowed, absl::Duration model_planned,
                                     absl::Duration healthy) {
  const double k =
      model_healthy > absl::ZeroDuration() ? absl::FDivDuration(healthy, model_healthy) : 1.0;
  falcon::v1::PlanCeiling c;
  c.set_strategy(strategy);
  c.set_healthy_iteration_time_ns(absl::ToInt64Nanoseconds(healthy));
  c.set_slowed_iteration_time_ns(absl::ToInt64Nanoseconds(model_slowed * k));
  c.set_predicted_iteration_time_ns(absl::ToInt64Nanoseconds(model_planned * k));
  if (model_slowed > model_healthy) {
    c.set_recoverable(
        absl::FDivDuration(model_slowed - model_planned, model_slowed - model_healthy));
  }
  return c;
}

// The ceiling of `splits` with `micro_batches` from the model's baseline.
std::optional<falcon::v1::PlanCeiling> SplitCeiling(
    falcon::v1::Strategy strategy, const SplitModel& model,
    const std::vector<analysis::plan::StageSplit>& splits,
    const std::vector<int64_t>& micro_batches, absl::Duration healthy) {
  absl::StatusOr<analysis::plan::LayerSplitPlan> plan =
      analysis::plan::EvaluateLayerSplit(model.problem, splits, micro_batches);
  if (!plan.ok()) return std::nullopt;
  absl::StatusOr<analysis::plan::RecoverableCeiling> c =
      analysis::plan::CeilingOf(model.problem, model.base_splits, model.base_micro_batches, *plan);
  if (!c.ok()) return std::nullopt;
  return CeilingProto(strategy, c->healthy, c->slowed, c->planned, healthy);
}

}  // namespace

Culprit CulpritOf(const falcon::v1::Event& event, const registry::JobEntry& job) {
  Culprit c;
  c.cause = event.cause();
  c.ranks.assign(event.ranks().begin(), event.ranks().end());
  c.links.assign(event.links().begin(), event.links().end());
  c.nodes.assign(event.nodes().begin(), event.nodes().end());
  c.node_ranks = RanksOfNodes(c.nodes, job);
  FillLinkEnds(job, &c);
  c.slowdown_ratio = std::max(1.0, event.slowdown_ratio());
  return c;
}

void FillLinkEnds(const registry::JobEntry& job, Culprit* culprit) {
  for (const falcon::v1::Link& k : culprit->links) {
    for (uint32_t r : {k.src_rank(), k.dst_rank()}) {
      const falcon::v1::RankInfo* info = job.FindRank(r);
      if (info == nullptr || info->node().empty()) continue;
      culprit->link_end_nodes[r] = info->node();
      if (culprit->link_node_ranks.count(info->node()) == 0) {
        culprit->link_node_ranks[info->node()] = job.RanksOnNode(info->node());
      }
    }
  }
}

std::vector<uint32_t> RanksOfNodes(const std::vector<std::string>& nodes,
                                   const registry::JobEntry& job) {
  std::set<uint32_t> out;
  for (const std::string& n : nodes) {
    for (uint32_t r : job.RanksOnNode(n)) out.insert(r);
  }
  return std::vector<uint32_t>(out.begin(), out.end());
}

std::vector<uint32_t> EvenSplit(int64_t global_micro_batches, int dp, int pp) {
  std::vector<uint32_t> m(std::max(dp, 0), 0);
  if (dp <= 0 || pp <= 0) return m;
  const int64_t blocks = global_micro_batches / pp;
  for (int d = 0; d < dp; ++d) {
    m[d] = static_cast<uint32_t>((blocks / dp + (d < blocks % dp ? 1 : 0)) * pp);
  }
  return m;
}

double CulpritStageSlowdown(const Culprit& culprit, int64_t m, int pp) {
  if (culprit.measured_stage_slowdown > 1.0)
    return std::min(culprit.measured_stage_slowdown, 1000.0);
  return StageSlowdown(culprit.slowdown_ratio, m, pp);
}

double ComputeFraction(const Culprit& culprit, int64_t m, int pp) {
  const double s = culprit.measured_stage_slowdown;
  if (!(s > 1.0) || !(culprit.slowdown_ratio > 1.0)) return 1.0;
  // The job's slowdown as its culprit stage's whole slot would take it, over the compute's own.
  const double slot = StageSlowdown(culprit.slowdown_ratio, m, pp);
  return std::clamp((slot - 1.0) / (s - 1.0), kMinComputeFraction, 1.0);
}

double StageSlowdown(double job_ratio, int64_t m, int pp) {
  if (!(job_ratio > 1.0)) return 1.0;
  const double s = 1.0 + (job_ratio - 1.0) * static_cast<double>(m + pp - 1) /
                             static_cast<double>(std::max<int64_t>(1, m));
  return std::min(1000.0, s);
}

absl::StatusOr<JobShape> ShapeOf(const registry::JobEntry& job,
                                 const analysis::plan::Layout* layout,
                                 const std::vector<uint32_t>& micro_batches) {
  JobShape shape;
  if (layout != nullptr && layout->world_size() > 0) {
    shape.layout = *layout;
  } else {
    std::vector<analysis::plan::RankPlacement> ranks;
    for (uint32_t rank : job.ranks()) {
      const falcon::v1::RankInfo& r = *job.FindRank(rank);
      if (r.dp_index() < 0 || r.pp_index() < 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("job '", job.name(), "': rank ", r.rank(),
                         " has no dp_index/pp_index (layout unknown; cannot plan S2/S3)"));
      }
      analysis::plan::RankPlacement p;
      p.rank = static_cast<int32_t>(r.rank());
      p.node = r.node();
      p.dp = r.dp_index();
      p.pp = r.pp_index();
      p.tp = std::max(0, r.tp_index());
      ranks.push_back(std::move(p));
    }
    absl::StatusOr<analysis::plan::Layout> l = analysis::plan::Layout::Create(std::move(ranks));
    if (!l.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job '", job.name(), "' layout: ", l.status().message()));
    }
    shape.layout = *std::move(l);
  }
  const int dp = shape.layout.dp_size(), pp = shape.layout.pp_size();
  int64_t m = 0;
  for (const auto& [agent, part] : job.parts()) {
    m = std::max<int64_t>(m, part.registration().global_micro_batches());
  }
  if (m == 0) m = static_cast<int64_t>(dp) * pp;
  shape.global_micro_batches = m;
  if (static_cast<int>(micro_batches.size()) == dp) {
    shape.micro_batches = micro_batches;
  } else {
    shape.micro_batches = EvenSplit(m, dp, pp);
  }
  // The pipeline as the job record has it, else as the agents registered it.
  int64_t blocks = 0, block_bytes = 0;
  for (const auto& [agent, part] : job.parts()) {
    blocks = std::max<int64_t>(blocks, part.registration().pipeline_blocks());
    block_bytes = std::max<int64_t>(
        block_bytes, static_cast<int64_t>(std::min<uint64_t>(
                         part.registration().block_state_bytes(), common::kMaxBlockStateBytes)));
  }
  if (job.job().pipeline_blocks() > 0) blocks = job.job().pipeline_blocks();
  if (job.job().block_state_bytes() > 0) {
    block_bytes = static_cast<int64_t>(
        std::min<uint64_t>(job.job().block_state_bytes(), common::kMaxBlockStateBytes));
  }
  shape.pipeline_blocks = blocks <= common::kMaxPipelineBlocks ? static_cast<int>(blocks) : 0;
  shape.block_state_bytes = block_bytes;
  if (job.job().layer_split_size() > 0 && shape.pipeline_blocks > 0) {
    falcon::v1::LayerSplit split;
    *split.mutable_replicas() = job.job().layer_split();
    for (int d = 0; d < dp; ++d) split.add_micro_batches(1);  // Only the split is checked.
    if (common::ValidateLayerSplit(split, dp, pp, shape.pipeline_blocks, 0).ok()) {
      shape.layer_split = common::StageBlocksOf(split);
    }
  }
  return shape;
}

bool Resplittable(const JobShape& shape) {
  const int pp = shape.layout.pp_size();
  return pp >= 2 && shape.pipeline_blocks > pp &&
         shape.pipeline_blocks <= common::kMaxPipelineBlocks;
}

std::vector<common::StageBlocks> SplitInForce(const JobShape& shape) {
  const int dp = shape.layout.dp_size(), pp = shape.layout.pp_size();
  if (static_cast<int>(shape.layer_split.size()) == dp) return shape.layer_split;
  if (shape.pipeline_blocks < pp || pp < 1) return {};
  return std::vector<common::StageBlocks>(dp, common::EvenStageBlocks(shape.pipeline_blocks, pp));
}

absl::StatusOr<S2Plan> PlanS2(const JobShape& shape, const Culprit& culprit, absl::Duration healthy,
                              const std::vector<Culprit>& others) {
  const analysis::plan::Layout& l = shape.layout;
  const int D = l.dp_size(), P = l.pp_size();
  const int64_t m = PerReplica(shape);
  bool any = false;
  for (uint32_t r : culprit.ranks) any = any || static_cast<int>(r) < l.world_size();
  if (!any) return absl::FailedPreconditionError("S2: no culprit rank in the job's layout");
  const double s = CulpritStageSlowdown(culprit, m, P);
  const absl::Duration c = StageCompute(healthy, m, P);
  const std::vector<double> cells = CellSlowdowns(shape, culprit, s, others);
  // Per DP group speed: the steady-state time per micro-batch is its slowest stage.
  std::vector<absl::Duration> times;
  for (int d = 0; d < D; ++d) {
    double worst = 1.0;
    for (int p = 0; p < P; ++p) worst = std::max(worst, cells[static_cast<size_t>(d) * P + p]);
    times.push_back(absl::Nanoseconds(std::llround(worst * 1e6)));
  }
  absl::StatusOr<analysis::plan::MicroBatchSplit> split =
      analysis::plan::SolveMicroBatches(times, shape.global_micro_batches, P);
  if (!split.ok()) return split.status();
  S2Plan plan;
  plan.stage_slowdown = s;
  plan.stage_slowdown_measured = culprit.measured_stage_slowdown > 1.0;
  for (int64_t v : split->micro_batches) plan.micro_batches.push_back(static_cast<uint32_t>(v));
  absl::StatusOr<absl::Duration> after = Predict(shape, cells, plan.micro_batches, c);
  if (!after.ok()) return after.status();
  absl::StatusOr<absl::Duration> before = Predict(shape, cells, shape.micro_batches, c);
  if (!before.ok()) return before.status();
  plan.predicted = *after;
  plan.predicted_current = *before;
  plan.improves = plan.micro_batches != shape.micro_batches && *after < *before * 0.98;
  plan.summary =
      absl::StrFormat("m = [%s] (was [%s]), culprit stage slowdown x%.2f, predicted %s (now %s)",
                      absl::StrJoin(plan.micro_batches, ", "),
                      absl::StrJoin(shape.micro_batches, ", "), s, Secs(*after), Secs(*before));
  for (const Culprit& o : others) {
    if (o.cause != falcon::v1::CAUSE_COMPUTE || o.ranks.empty()) continue;
    absl::StrAppend(&plan.summary,
                    absl::StrFormat("; also rank %s of another event x%.2f",
                                    absl::StrJoin(o.ranks, ","), CulpritStageSlowdown(o, m, P)));
  }
  // The ceiling on the layer split model (per block when the blocks are known, else one block
  // per stage: the same 1F1B model as Predict) with the split in force.
  absl::StatusOr<SplitModel> model =
      SplitModelOf(shape, cells, healthy, Resplittable(shape) ? shape.pipeline_blocks : P,
                   ComputeFraction(culprit, m, P));
  if (model.ok()) {
    plan.ceiling = SplitCeiling(
        falcon::v1::STRATEGY_S2_MICRO_BATCH, *model, model->base_splits,
        std::vector<int64_t>(plan.micro_batches.begin(), plan.micro_batches.end()), healthy);
  }
  return plan;
}

absl::StatusOr<S2LPlan> PlanS2L(const JobShape& shape, const Culprit& culprit,
                                absl::Duration healthy, const std::vector<Culprit>& others) {
  const analysis::plan::Layout& l = shape.layout;
  const int D = l.dp_size(), P = l.pp_size();
  const int L = shape.pipeline_blocks;
  if (!Resplittable(shape)) {
    return absl::FailedPreconditionError(
        absl::StrCat("S2L: the job's pipeline cannot be re-split (pp ", P, ", ",
                     L > 0 ? absl::StrCat(L, " blocks") : std::string("blocks unknown"), ")"));
  }
  const int64_t m = PerReplica(shape);
  bool any = false;
  for (uint32_t r : culprit.ranks) any = any || static_cast<int>(r) < l.world_size();
  if (!any) return absl::FailedPreconditionError("S2L: no culprit rank in the job's layout");
  const double s = CulpritStageSlowdown(culprit, m, P);
  const std::vector<double> cells = CellSlowdowns(shape, culprit, s, others);
  const double f = ComputeFraction(culprit, m, P);
  absl::StatusOr<SplitModel> model = SplitModelOf(shape, cells, healthy, L, f);
  if (!model.ok()) return model.status();
  const analysis::plan::LayerSplitProblem& problem = model->problem;
  absl::StatusOr<analysis::plan::LayerSplitPlan> best = analysis::plan::PlanLayerSplit(problem);
  if (!best.ok()) return absl::FailedPreconditionError(best.status().message());
  std::vector<int64_t> counts;
  std::vector<analysis::plan::StageSplit> splits;
  for (const analysis::plan::ReplicaLayerPlan& r : best->replicas) {
    counts.push_back(r.micro_batches);
    splits.push_back(r.first_layer);
  }
  // A replica keeps the split in force when it is no slower under the planned counts (a healthy
  // pipeline, or one of several equally good splits): fewer blocks move.
  absl::StatusOr<analysis::plan::LayerSplitPlan> kept =
      analysis::plan::EvaluateLayerSplit(problem, model->base_splits, counts);
  if (kept.ok()) {
    std::vector<analysis::plan::StageSplit> mixed = splits;
    for (int d = 0; d < D; ++d) {
      if (kept->replicas[d].pipeline <= best->replicas[d].pipeline) {
        mixed[d] = model->base_splits[d];
      }
    }
    absl::StatusOr<analysis::plan::LayerSplitPlan> check =
        analysis::plan::EvaluateLayerSplit(problem, mixed, counts);
    if (check.ok() && check->iteration <= best->iteration) {
      splits = std::move(mixed);
      best = std::move(check);
    }
  }
  // S2 alone: the best counts for the split in force, in multiples of P as S2 plans them.
  analysis::plan::LayerSplitProblem s2_problem = problem;
  if (shape.global_micro_batches % P == 0 && shape.global_micro_batches >= int64_t{D} * P) {
    s2_problem.multiple = P;
  }
  absl::StatusOr<analysis::plan::LayerSplitPlan> s2 =
      analysis::plan::PlanMicroBatchesForSplits(s2_problem, model->base_splits);
  if (!s2.ok()) return absl::FailedPreconditionError(s2.status().message());
  absl::StatusOr<analysis::plan::LayerSplitPlan> current =
      analysis::plan::EvaluateLayerSplit(problem, model->base_splits, model->base_micro_batches);

  S2LPlan plan;
  plan.stage_slowdown = s;
  plan.predicted = best->iteration;
  plan.predicted_s2 = s2->iteration;
  plan.predicted_current = current.ok() ? current->iteration : s2->iteration;
  std::vector<common::StageBlocks> base;
  for (int d = 0; d < D; ++d) {
    plan.split.push_back(BlocksOf(splits[d], L));
    base.push_back(BlocksOf(model->base_splits[d], L));
    plan.blocks_moved += BlocksMoved(model->base_splits[d], splits[d], L);
    plan.micro_batches.push_back(static_cast<uint32_t>(counts[d]));
  }
  // Saturating: blocks × bytes may exceed int64 for absurd (but accepted) block sizes.
  const double bytes = static_cast<double>(plan.blocks_moved) * shape.block_state_bytes;
  plan.bytes_moved =
      bytes >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bytes);
  plan.improves = plan.blocks_moved > 0 && plan.predicted < plan.predicted_s2 * 0.98;
  plan.summary = absl::StrFormat(
      "split %s (was %s), m = [%s] (was [%s]), %d blocks move (%d bytes), culprit stage slowdown "
      "x%.2f, pipeline %.0f%% of an iteration, predicted %s (S2 alone %s, now %s)",
      common::SplitText(plan.split, L), common::SplitText(base, L),
      absl::StrJoin(plan.micro_batches, ", "), absl::StrJoin(shape.micro_batches, ", "),
      plan.blocks_moved, plan.bytes_moved, s, 100 * std::clamp(f, kMinComputeFraction, 1.0),
      Secs(plan.predicted), Secs(plan.predicted_s2), Secs(plan.predicted_current));
  for (const Culprit& o : others) {
    if (o.cause != falcon::v1::CAUSE_COMPUTE || o.ranks.empty()) continue;
    absl::StrAppend(&plan.summary,
                    absl::StrFormat("; also rank %s of another event x%.2f",
                                    absl::StrJoin(o.ranks, ","), CulpritStageSlowdown(o, m, P)));
  }
  plan.ceiling =
      SplitCeiling(falcon::v1::STRATEGY_S2L_LAYER_SPLIT, *model, splits, counts, healthy);
  return plan;
}

falcon::v1::TopologyChange ToTopologyChange(const analysis::plan::Layout& layout) {
  falcon::v1::TopologyChange change;
  for (const analysis::plan::RankPlacement& p : layout.ranks()) {
    falcon::v1::RankAssignment* a = change.add_assignments();
    a->set_rank(static_cast<uint32_t>(p.rank));
    a->set_dp_index(static_cast<uint32_t>(p.dp));
    a->set_pp_index(static_cast<uint32_t>(p.pp));
    a->set_tp_index(static_cast<uint32_t>(p.tp));
  }
  return change;
}

absl::StatusOr<S3Plan> PlanS3(const JobShape& shape, const Culprit& own, absl::Duration healthy,
                              const std::vector<Culprit>& others) {
  // The topology model's pipelines are even: over an uneven split its predictions (and the slow
  // stage the split shrank, which a move would put elsewhere) would be wrong.
  if (!shape.layer_split.empty() &&
      !common::IsEvenSplit(shape.layer_split, shape.pipeline_blocks)) {
    return absl::FailedPreconditionError(
        absl::StrCat("S3: a layer split is in force (S2L: ",
                     common::SplitText(shape.layer_split, shape.pipeline_blocks),
                     "); the topology model plans even pipelines only"));
  }
  // Every slow link, node and rank the job's active events know: the layout avoids them all.
  Culprit culprit = own;
  for (const Culprit& o : others) {
    culprit.links.insert(culprit.links.end(), o.links.begin(), o.links.end());
    culprit.nodes.insert(culprit.nodes.end(), o.nodes.begin(), o.nodes.end());
    if (o.cause == falcon::v1::CAUSE_COMPUTE) {
      culprit.ranks.insert(culprit.ranks.end(), o.ranks.begin(), o.ranks.end());
    }
  }
  const analysis::plan::Layout& l = shape.layout;
  const int P = l.pp_size();
  const int64_t m = PerReplica(shape);
  analysis::plan::TopologyPlannerOptions options;
  options.model.micro_batches = m;
  const absl::Duration c = StageCompute(healthy, m, P);
  options.model.stage_compute = {c};
  options.model.p2p = c / 20;
  options.model.allreduce = c;
  // A link's slowdown from the job's: the extra time sits in the all-reduce over it.
  const double link_slowdown = std::clamp(
      1.0 + (culprit.slowdown_ratio - 1.0) * absl::FDivDuration(healthy, c), 1.5, 1000.0);
  std::vector<analysis::plan::SlowLink> links;
  for (const falcon::v1::Link& k : culprit.links) {
    if (static_cast<int>(k.src_rank()) >= l.world_size() ||
        static_cast<int>(k.dst_rank()) >= l.world_size() || k.src_rank() == k.dst_rank()) {
      continue;
    }
    links.push_back(
        {static_cast<int32_t>(k.src_rank()), static_cast<int32_t>(k.dst_rank()), link_slowdown});
  }
  // A slow NIC slows the node's links to every other node (docs/algorithms.md#node-nic-faults):
  // one link per node pair stands for them (the planner judges node pairs).
  const std::set<std::string> slow_nodes(culprit.nodes.begin(), culprit.nodes.end());
  std::map<std::string, int32_t> first_rank;  // Node -> its lowest rank in the layout.
  for (const analysis::plan::RankPlacement& p : l.ranks()) {
    auto [it, inserted] = first_rank.emplace(p.node, p.rank);
    if (!inserted) it->second = std::min(it->second, p.rank);
  }
  std::vector<std::string> nic_notes;
  for (const std::string& n : slow_nodes) {
    auto self = first_rank.find(n);
    if (self == first_rank.end()) continue;
    for (const auto& [other, rank] : first_rank) {
      if (other != n) links.push_back({self->second, rank, link_slowdown});
    }
    nic_notes.push_back(absl::StrCat("node ", n, "'s NIC: its links to ", first_rank.size() - 1,
                                     " other nodes count as slow"));
  }
  std::vector<analysis::plan::SlowRank> ranks;
  const double s = CulpritStageSlowdown(culprit, m, P);
  for (uint32_t r : culprit.ranks) {
    if (static_cast<int>(r) < l.world_size()) ranks.push_back({static_cast<int32_t>(r), s});
  }
  if (links.empty() && ranks.empty()) {
    return absl::FailedPreconditionError("S3: no culprit link or rank in the job's layout");
  }
  absl::StatusOr<analysis::plan::TopologyPlan> t =
      analysis::plan::PlanTopology(l, links, ranks, options);
  if (!t.ok()) return t.status();
  S3Plan plan;
  plan.layout = t->layout;
  plan.change = ToTopologyChange(t->layout);
  plan.predicted = t->after.iteration;
  plan.predicted_current = t->before.iteration;
  plan.improves = !t->moved_ranks.empty() && t->after.iteration < t->before.iteration;
  // The ceiling: the planner's estimates, with the layout in force and no slowdown as healthy.
  absl::StatusOr<analysis::plan::JobTiming> unslowed =
      analysis::plan::LayoutTiming(l, {}, {}, options.model);
  if (unslowed.ok()) {
    absl::StatusOr<analysis::plan::IterationEstimate> h =
        analysis::plan::EstimateIteration(*unslowed);
    if (h.ok()) {
      plan.ceiling = CeilingProto(falcon::v1::STRATEGY_S3_TOPOLOGY, h->iteration,
                                  t->before.iteration, t->after.iteration, healthy);
    }
  }
  plan.summary = absl::StrFormat(
      "%d ranks move; slow links in DP %d -> %d, in PP %d -> %d; straggler stages %d -> %d; "
      "predicted %s (now %s)%s%s",
      static_cast<int>(t->moved_ranks.size()), t->slow_links_in_dp_before,
      t->slow_links_in_dp_after, t->slow_links_in_pp_before, t->slow_links_in_pp_after,
      t->straggler_stages_before, t->straggler_stages_after, Secs(t->after.iteration),
      Secs(t->before.iteration), t->notes.empty() ? "" : "; ", absl::StrJoin(t->notes, "; "));
  for (const std::string& note : nic_notes) absl::StrAppend(&plan.summary, "; ", note);
  return plan;
}

namespace {

// The links of `culprit` that touch none of its culprit nodes (those go with the nodes).
std::vector<falcon::v1::Link> LinksOffCulpritNodes(const Culprit& culprit) {
  const std::set<uint32_t> on_nodes(culprit.node_ranks.begin(), culprit.node_ranks.end());
  std::vector<falcon::v1::Link> out;
  for (const falcon::v1::Link& k : culprit.links) {
    // A link of a culprit node is its NIC's evidence: the node's ranks go, not the far end.
    if (on_nodes.count(k.src_rank()) > 0 || on_nodes.count(k.dst_rank()) > 0) continue;
    out.push_back(k);
  }
  return out;
}

// A cover unit: "node NAME", or "rank R" for an end without a node.
std::string CoverUnit(const Culprit& culprit, uint32_t rank) {
  auto it = culprit.link_end_nodes.find(rank);
  if (it != culprit.link_end_nodes.end()) return absl::StrCat("node ", it->second);
  return absl::StrCat("rank ", rank);
}

// S4LinkCover's units, "node NAME" or "rank R".
std::set<std::string> CoverUnits(const Culprit& culprit,
                                 const std::vector<falcon::v1::Link>& links) {
  // Each link's two units, computed once.
  std::vector<std::pair<std::string, std::string>> ends;
  ends.reserve(links.size());
  for (const falcon::v1::Link& k : links) {
    ends.emplace_back(CoverUnit(culprit, k.src_rank()), CoverUnit(culprit, k.dst_rank()));
  }
  // A unit's lowest rank: its node's (every rank the job has there), else its own.
  auto lowest = [&](const std::string& unit, uint32_t end_rank) {
    auto node = culprit.link_node_ranks.find(unit.substr(5));
    if (absl::StartsWith(unit, "node ") && node != culprit.link_node_ranks.end() &&
        !node->second.empty()) {
      return std::min(end_rank, *std::min_element(node->second.begin(), node->second.end()));
    }
    return end_rank;
  };
  std::vector<bool> covered(links.size(), false);
  std::set<std::string> chosen;
  for (;;) {
    struct Score {
      bool not_rank0 = true;  // The unit holding rank 0 goes last (see planner.h).
      int links = 0;
      int received = 0;
      uint32_t lowest_rank = std::numeric_limits<uint32_t>::max();
    };
    std::map<std::string, Score> scores;
    for (size_t i = 0; i < links.size(); ++i) {
      if (covered[i]) continue;
      const auto& [src, dst] = ends[i];
      if (src == dst) {  // A link inside one unit: only that unit covers it, whatever its rank.
        Score& u = scores[src];
        ++u.links;
        ++u.received;
        u.lowest_rank = std::min(u.lowest_rank, lowest(src, links[i].src_rank()));
        continue;
      }
      Score& d = scores[dst];
      ++d.links;
      ++d.received;
      d.lowest_rank = std::min(d.lowest_rank, lowest(dst, links[i].dst_rank()));
      Score& s = scores[src];
      ++s.links;
      s.lowest_rank = std::min(s.lowest_rank, lowest(src, links[i].src_rank()));
    }
    if (scores.empty()) break;
    for (auto& [unit, score] : scores) score.not_rank0 = score.lowest_rank != 0;
    // The rank-0 unit only for a link that lies wholly inside it.
    for (size_t i = 0; i < links.size(); ++i) {
      if (!covered[i] && ends[i].first == ends[i].second) scores[ends[i].first].not_rank0 = true;
    }
    auto best = scores.begin();
    for (auto it = scores.begin(); it != scores.end(); ++it) {
      const Score& a = it->second;
      const Score& b = best->second;
      if (std::tie(a.not_rank0, a.links, a.received, a.lowest_rank) >
          std::tie(b.not_rank0, b.links, b.received, b.lowest_rank)) {
        best = it;
      }
    }
    chosen.insert(best->first);
    for (size_t i = 0; i < links.size(); ++i) {
      if (ends[i].first == best->first || ends[i].second == best->first) covered[i] = true;
    }
  }
  return chosen;
}

}  // namespace

std::vector<std::string> S4LinkCover(const Culprit& culprit) {
  std::vector<std::string> out;
  for (const std::string& unit : CoverUnits(culprit, LinksOffCulpritNodes(culprit))) {
    out.push_back(absl::StartsWith(unit, "node ") ? unit.substr(5) : unit);
  }
  return out;
}

std::vector<uint32_t> S4Excluded(const Culprit& culprit) {
  // An unknown verdict lists the ranks whose series slowed, not culprits: nothing to leave out.
  if (culprit.cause != falcon::v1::CAUSE_COMPUTE &&
      culprit.cause != falcon::v1::CAUSE_COMMUNICATION) {
    return {};
  }
  std::set<uint32_t> out(culprit.ranks.begin(), culprit.ranks.end());
  if (culprit.cause == falcon::v1::CAUSE_COMMUNICATION) {
    out.insert(culprit.node_ranks.begin(), culprit.node_ranks.end());
    const std::vector<falcon::v1::Link> links = LinksOffCulpritNodes(culprit);
    const std::set<std::string> units = CoverUnits(culprit, links);
    for (const std::string& unit : units) {
      auto node = culprit.link_node_ranks.find(unit.substr(5));
      if (absl::StartsWith(unit, "node ") && node != culprit.link_node_ranks.end()) {
        out.insert(node->second.begin(), node->second.end());
      }
    }
    // Ends in a chosen unit that the node's rank list lacks (or that have no node) go too.
    for (const falcon::v1::Link& k : links) {
      for (uint32_t r : {k.src_rank(), k.dst_rank()}) {
        if (units.count(CoverUnit(culprit, r)) > 0) out.insert(r);
      }
    }
  }
  return std::vector<uint32_t>(out.begin(), out.end());
}

std::string S4Summary(const Culprit& culprit) {
  std::string out =
      absl::StrCat("restart without ranks [", absl::StrJoin(S4Excluded(culprit), ", "), "]");
  if (culprit.cause != falcon::v1::CAUSE_COMMUNICATION) return out;
  std::vector<std::string> notes;
  if (!culprit.nodes.empty()) {
    notes.push_back(absl::StrCat("every rank of node ", absl::StrJoin(culprit.nodes, ", node "),
                                 culprit.nodes.size() == 1 ? ", its NIC" : ", their NICs"));
  }
  std::vector<std::string> cover_nodes;
  for (const std::string& unit : S4LinkCover(culprit)) {
    if (!absl::StartsWith(unit, "rank ")) cover_nodes.push_back(unit);
  }
  if (!cover_nodes.empty()) {
    notes.push_back(absl::StrCat("every rank of node ", absl::StrJoin(cover_nodes, ", node "),
                                 ", at an end of the slow links"));
  }
  if (!notes.empty()) absl::StrAppend(&out, " (", absl::StrJoin(notes, "; "), ")");
  return out;
}

absl::StatusOr<falcon::v1::DryRunPlanResponse> DryRun(
    const JobShape& shape, const settings::EffectiveSettings& settings, const Culprit& culprit,
    absl::Duration healthy, absl::Time now, const LadderState& state,
    const std::optional<analysis::plan::S2LMeasurement>& s2l_measured) {
  if (healthy <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError("no healthy iteration time known for the job yet");
  }
  const double r = std::max(culprit.slowdown_ratio, 1.0);
  const absl::Duration delta = healthy * (r - 1.0);
  falcon::v1::DryRunPlanResponse out;
  const bool compute = culprit.cause == falcon::v1::CAUSE_COMPUTE;
  const bool comm = culprit.cause == falcon::v1::CAUSE_COMMUNICATION;
  struct Rung {
    falcon::v1::Strategy strategy;
    absl::Duration cost;
    bool enabled;
    std::string why;
  };
  std::vector<Rung> ladder;
  ladder.push_back({falcon::v1::STRATEGY_S1_IGNORE, absl::ZeroDuration(), true, "costs nothing"});
  if (compute) {
    ladder.push_back(
        {falcon::v1::STRATEGY_S2_MICRO_BATCH, delta * settings.s2_cost_iterations,
         settings.s2_enabled,
         absl::StrFormat("%g x Δt_iter %s", settings.s2_cost_iterations, Secs(delta))});
  }
  // S2L for a pipeline that can be re-split (as the escalation's candidates): its cost needs the
  // bytes its plan moves.
  std::optional<absl::StatusOr<S2LPlan>> s2l;
  if (compute && Resplittable(shape)) {
    s2l = PlanS2L(shape, culprit, healthy);
    const int64_t bytes = s2l->ok() ? (*s2l)->bytes_moved : 0;
    std::string why;
    const absl::Duration cost =
        analysis::plan::S2LCost(bytes, settings.s2l_bandwidth_bytes_per_s,
                                absl::Seconds(settings.s2l_pause_seconds), s2l_measured, &why);
    ladder.push_back({falcon::v1::STRATEGY_S2L_LAYER_SPLIT, cost, settings.s2l_enabled, why});
  }
  if (compute || comm) {
    ladder.push_back({falcon::v1::STRATEGY_S3_TOPOLOGY, absl::Seconds(settings.s3_cost_seconds),
                      settings.s3_enabled, "setting"});
  }
  ladder.push_back({falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART,
                    absl::Seconds(settings.s4_cost_seconds), settings.s4_enabled, "setting"});
  // By cost; equal costs in escalation order (S2L between S2 and S3, whatever its number).
  std::stable_sort(ladder.begin(), ladder.end(),
                   [](const Rung& a, const Rung& b) { return a.cost < b.cost; });
  bool predicted = false;
  for (const Rung& rung : ladder) {
    falcon::v1::Action a;
    a.set_strategy(rung.strategy);
    a.set_time_ns(absl::ToUnixNanos(now));
    a.set_dry_run(true);
    std::string reason;
    auto taken = state.taken.find(rung.strategy);
    if (taken != state.taken.end()) {
      a.set_iteration(taken->second.iteration);
      reason = taken->second.what;
    } else if (rung.strategy == falcon::v1::STRATEGY_S1_IGNORE) {
      a.set_iteration(state.iteration);
      reason = "S1 at once (costs nothing)";
    } else {
      // Slow iterations until the lost time reaches the cost.
      const absl::Duration due = std::max(absl::ZeroDuration(), rung.cost - state.lost);
      // -1 ("?") when there is no slowdown or the count would not fit (a cost of ages).
      const double n =
          delta > absl::ZeroDuration() ? std::ceil(absl::FDivDuration(due, delta)) : -1;
      const int64_t more = n >= 0 && n < 1e15 ? static_cast<int64_t>(n) : -1;
      if (more >= 0) a.set_iteration(state.iteration + more);
      reason = absl::StrCat("when lost >= ", Secs(rung.cost), " (", rung.why, "); after ~",
                            more >= 0 ? absl::StrCat(more) : std::string("?"),
                            state.lost > absl::ZeroDuration() ? " more" : "", " slow iterations");
    }
    if (!rung.enabled) absl::StrAppend(&reason, "; disabled for this job");
    if (rung.strategy == falcon::v1::STRATEGY_S2_MICRO_BATCH) {
      absl::StatusOr<S2Plan> p = PlanS2(shape, culprit, healthy);
      if (p.ok()) {
        for (uint32_t v : p->micro_batches) out.mutable_micro_batch_plan()->add_micro_batches(v);
        absl::StrAppend(&reason, "; ", p->summary, p->improves ? "" : "; no better plan");
        if (p->improves && rung.enabled && !predicted) {
          out.set_predicted_iteration_time_s(absl::ToDoubleSeconds(p->predicted));
          predicted = true;
        }
      } else {
        absl::StrAppend(&reason, "; not applicable: ", p.status().message());
      }
    } else if (rung.strategy == falcon::v1::STRATEGY_S2L_LAYER_SPLIT) {
      const absl::StatusOr<S2LPlan>& p = *s2l;
      if (p.ok()) {
        falcon::v1::LayerSplit* split = out.mutable_layer_split();
        common::SetStageBlocks(p->split, split);
        for (uint32_t v : p->micro_batches) split->add_micro_batches(v);
        absl::StrAppend(&reason, "; ", p->summary,
                        p->improves ? "" : "; no better plan than S2 alone");
        if (p->improves && rung.enabled && !predicted) {
          out.set_predicted_iteration_time_s(absl::ToDoubleSeconds(p->predicted));
          predicted = true;
        }
      } else {
        absl::StrAppend(&reason, "; not applicable: ", p.status().message());
      }
    } else if (rung.strategy == falcon::v1::STRATEGY_S3_TOPOLOGY) {
      absl::StatusOr<S3Plan> p = PlanS3(shape, culprit, healthy);
      if (p.ok()) {
        *out.mutable_topology_change() = p->change;
        absl::StrAppend(&reason, "; ", p->summary, p->improves ? "" : "; no better layout");
        if (p->improves && rung.enabled && !predicted) {
          out.set_predicted_iteration_time_s(absl::ToDoubleSeconds(p->predicted));
          predicted = true;
        }
      } else {
        absl::StrAppend(&reason, "; not applicable: ", p.status().message());
      }
    } else if (rung.strategy == falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART) {
      absl::StrAppend(&reason, "; ", S4Summary(culprit));
    }
    a.set_reason(std::move(reason));
    *out.add_actions() = std::move(a);
  }
  if (!predicted) out.set_predicted_iteration_time_s(absl::ToDoubleSeconds(healthy * r));
  return out;
}

}  // namespace falcon::controller::mitigation
