// Benchmarks of the mitigation planners (./falcon bench). Prints human-readable tables:
//   S2: solve time at D = 16 … 16,384 DP groups beside the paper's cvxpy times (Table 6/5);
//   S3: planning time and predicted gain at 1,024 ranks;
//   layer split (re-partition + micro-batches): planning time and recoverable share at 1,024
//   ranks.
// Inputs are seeded, so every run solves the same problems. Times: the minimum CPU time of one
// solve (robust when other processes share the cores) and the median wall time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analysis/plan/layer_split_planner.h"
#include "analysis/plan/micro_batch_solver.h"
#include "analysis/plan/topology_planner.h"

namespace falcon::analysis::plan {
namespace {

using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// CPU time of this process (user + system), which other processes on the shared cores do not
// inflate the way they inflate wall time.
double CpuMillis() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Timing {
  double cpu_ms;     // minimum CPU time of one run
  double median_ms;  // median wall time of one run
};

// Times `fn` over repeated runs (at least 5 runs and about 0.2 s of wall time).
template <typename Fn>
Timing TimeMillis(Fn fn) {
  std::vector<double> wall, cpu;
  const auto start = Clock::now();
  while (wall.size() < 5 ||
         (Clock::now() - start < std::chrono::milliseconds(200) && wall.size() < 1000)) {
    const auto t0 = Clock::now();
    const double c0 = CpuMillis();
    fn();
    cpu.push_back(CpuMillis() - c0);
    wall.push_back(Millis(Clock::now() - t0));
  }
  std::sort(wall.begin(), wall.end());
  return {*std::min_element(cpu.begin(), cpu.end()), wall[wall.size() / 2]};
}

void BenchS2() {
  const std::map<int, const char*> paper = {{16, "0.01 s"},  {32, "0.01 s"},  {64, "0.01 s"},
                                            {128, "0.11 s"}, {256, "6.78 s"}, {512, "35.93 s"}};
  std::printf(
      "S2 micro-batch solver (exact; PP = 4 so q = 4; M = 8 x D x q; 5%% of groups\n"
      "1.2-2.0x slow, the rest 0.9-1.1 s per micro-batch)\n");
  std::printf("%8s %10s %10s %12s %14s %10s\n", "D", "M", "cpu (ms)", "wall (ms)", "paper cvxpy",
              "target");
  std::mt19937_64 rng(2024);
  for (int d = 16; d <= 16384; d *= 2) {
    std::vector<absl::Duration> t(d);
    for (int i = 0; i < d; ++i) {
      double s = 0.9 + 0.2 * static_cast<double>(rng() % 1000) / 1000.0;
      if (rng() % 20 == 0) s *= 1.2 + 0.8 * static_cast<double>(rng() % 1000) / 1000.0;
      t[i] = absl::Seconds(s);
    }
    const int64_t q = 4, m = int64_t{8} * d * q;
    bool ok = true;
    const Timing ms = TimeMillis([&] { ok &= SolveMicroBatches(t, m, q).ok(); });
    const char* target = d == 512 ? "<= 5 ms" : d == 16384 ? "<= 50 ms" : "";
    std::printf("%8d %10lld %10.3f %12.3f %14s %10s%s\n", d, static_cast<long long>(m), ms.cpu_ms,
                ms.median_ms, paper.count(d) ? paper.at(d) : "-", target,
                ok ? "" : "  (solver error!)");
  }
}

// A 1,024-rank job: dp x pp x tp with `per_node` TP groups per node (8 GPUs per node), whole
// pipelines packed on nodes in (dp, pp) order; a few slow links between nodes of one DP
// communicator and a few slow ranks spread over stages.
void BenchS3(int dp, int pp, int tp) {
  const int per_node = 8 / tp;
  std::vector<RankPlacement> ranks;
  for (int d = 0; d < dp; ++d) {
    for (int p = 0; p < pp; ++p) {
      const int cell = d * pp + p;
      for (int t = 0; t < tp; ++t) {
        ranks.push_back({static_cast<int32_t>(ranks.size()),
                         "node" + std::to_string(cell / per_node), d, p, t});
      }
    }
  }
  const Layout layout = *Layout::Create(ranks);
  std::mt19937_64 rng(7);
  std::vector<SlowLink> links;
  for (int i = 0; i < 4; ++i) {
    const int d = static_cast<int>(rng() % (dp - 1)), p = static_cast<int>(rng() % pp);
    links.push_back({layout.RankAt(d, p, 0), layout.RankAt(d + 1, p, 0), 3.0});
  }
  std::vector<SlowRank> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back({layout.RankAt(static_cast<int>(rng() % dp), static_cast<int>(rng() % pp),
                                  static_cast<int>(rng() % tp)),
                    1.5});
  }
  TopologyPlannerOptions o;
  o.model.micro_batches = 16;
  o.model.stage_compute = {absl::Milliseconds(200)};
  o.model.p2p = absl::Milliseconds(10);
  o.model.allreduce = absl::Milliseconds(800);
  o.model.stage_state_bytes_per_rank = int64_t{2} << 30;
  absl::StatusOr<TopologyPlan> plan;
  const double ms = TimeMillis([&] { plan = PlanTopology(layout, links, slow, o); }).cpu_ms;
  if (!plan.ok()) {
    std::printf("S3 %dx%dx%d: error %s\n", dp, pp, tp,
                std::string(plan.status().message()).c_str());
    return;
  }
  std::printf("%5d %3d %3d %3d %8d %10.1f %9.2f %9.2f %8d->%d %7d->%d %7d %9.1f\n",
              layout.world_size(), dp, pp, tp, dp * pp, ms,
              absl::ToDoubleSeconds(plan->before.iteration),
              absl::ToDoubleSeconds(plan->after.iteration), plan->slow_links_in_dp_before,
              plan->slow_links_in_dp_after, plan->straggler_stages_before,
              plan->straggler_stages_after, static_cast<int>(plan->moved_ranks.size()),
              static_cast<double>(plan->bytes_to_move) / (1 << 30));
}

// A 1,024-rank job of dp x pp cells (TP groups) running `layers` layers (an embedding and a head
// each worth 2 blocks, blocks of 10 ms per micro-batch forward + backward, 16 GiB per stage
// allowed at 1 GiB per block), 8 micro-batches per replica, with `slow` cells 1.2-2.0x slow.
void BenchLayerSplit(int dp, int pp, int tp, int layers, int slow, int64_t multiple) {
  LayerSplitProblem p;
  p.dp = dp;
  p.pp = pp;
  for (int l = 0; l < layers; ++l) {
    const bool end = l == 0 || l == layers - 1;
    p.layer_compute.push_back(absl::Milliseconds(end ? 20 : 10));
    p.layer_memory_bytes.push_back(int64_t{end ? 2 : 1} << 30);
  }
  p.stage_memory_limit_bytes = int64_t{16} << 30;
  p.boundary_p2p.assign(pp - 1, absl::Milliseconds(1));
  p.allreduce = absl::Milliseconds(200);
  p.multiple = multiple;
  p.global_micro_batches = int64_t{8} * dp;
  p.slowdowns.assign(static_cast<size_t>(dp) * pp, 1.0);
  std::mt19937_64 rng(5);
  for (int i = 0; i < slow; ++i) {
    p.slowdowns[rng() % p.slowdowns.size()] =
        1.2 + 0.8 * static_cast<double>(rng() % 1000) / 1000.0;
  }
  absl::StatusOr<LayerSplitPlan> plan;
  const double ms = TimeMillis([&] { plan = PlanLayerSplit(p); }).cpu_ms;
  const std::vector<StageSplit> even(dp, *EvenStageSplit(layers, pp));
  const std::vector<int64_t> eight(dp, 8);
  absl::StatusOr<LayerSplitPlan> s2 = PlanMicroBatchesForSplits(p, even);
  if (!plan.ok() || !s2.ok()) {
    std::printf("layer split %dx%dx%d: error %s\n", dp, pp, tp,
                std::string((plan.ok() ? s2 : plan).status().message()).c_str());
    return;
  }
  const RecoverableCeiling joint = *CeilingOf(p, even, eight, *plan);
  const RecoverableCeiling s2_only = *CeilingOf(p, even, eight, *s2);
  std::printf("%5d %3d %3d %3d %6d %4d %3lld %10.2f %7lld %9.3f %9.3f %9.3f %8.2f %8.2f %8s\n",
              dp * pp * tp, dp, pp, tp, layers, slow, static_cast<long long>(multiple), ms,
              static_cast<long long>(plan->front_points), absl::ToDoubleSeconds(joint.healthy),
              absl::ToDoubleSeconds(joint.slowed), absl::ToDoubleSeconds(joint.planned),
              s2_only.recoverable, joint.recoverable, dp * pp * tp == 1024 ? "<= 10 ms" : "");
}

}  // namespace
}  // namespace falcon::analysis::plan

int main() {
  falcon::analysis::plan::BenchS2();
  std::printf(
      "\nS3 topology planner at 1,024 ranks (4 slow DP links at 3x, 6 slow ranks at 1.5x;\n"
      "m = 16, 200 ms per stage, p2p 10 ms, all-reduce 800 ms, 2 GiB state per rank)\n");
  std::printf("%5s %3s %3s %3s %8s %10s %9s %9s %11s %10s %7s %9s\n", "ranks", "dp", "pp", "tp",
              "TPgroups", "cpu (ms)", "before s", "after s", "DP links", "slow stgs", "moved",
              "GiB moved");
  falcon::analysis::plan::BenchS3(16, 8, 8);
  falcon::analysis::plan::BenchS3(32, 8, 4);
  falcon::analysis::plan::BenchS3(128, 8, 1);
  std::printf(
      "\nLayer split planner (re-partition + micro-batches, exact) at 1,024 ranks: 8 "
      "micro-batches\n"
      "per replica, blocks 10 ms, embedding and head 20 ms, 1 GiB per block, 16 GiB per stage;\n"
      "`slow` cells 1.2-2.0x; recovered: share of the slowdown the plan recovers, S2 alone and "
      "joint\n");
  std::printf("%5s %3s %3s %3s %6s %4s %3s %10s %7s %9s %9s %9s %8s %8s %8s\n", "ranks", "dp", "pp",
              "tp", "layers", "slow", "q", "cpu (ms)", "front", "healthy s", "slowed s",
              "planned s", "S2 only", "joint", "target");
  falcon::analysis::plan::BenchLayerSplit(16, 8, 8, 82, 1, 1);
  falcon::analysis::plan::BenchLayerSplit(16, 8, 8, 82, 4, 8);
  falcon::analysis::plan::BenchLayerSplit(128, 8, 1, 66, 1, 1);
  falcon::analysis::plan::BenchLayerSplit(128, 8, 1, 66, 8, 1);
  falcon::analysis::plan::BenchLayerSplit(32, 32, 1, 130, 8, 1);
  return 0;
}
