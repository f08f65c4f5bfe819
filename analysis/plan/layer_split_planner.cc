#include "analysis/plan/layer_split_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace falcon::analysis::plan {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxTimeNs = int64_t{1000} * 1'000'000'000;  // 1000 s.
constexpr int64_t kMaxMicroBatches = 4'000'000;

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// One replica's view of the problem: per-stage slowdowns and fixed per-stage costs.
struct Profile {
  std::vector<double> slowdown;  // size P.
};

// One split's cost: A = Σ cycle, B = max cycle (ns).
struct SplitCost {
  int64_t sum = 0;
  int64_t max = 0;
};

// Shared read-only inputs, in whole nanoseconds.
struct Inputs {
  int layers = 0;
  int stages = 0;
  std::vector<int64_t> prefix_ns;     // size L + 1.
  std::vector<int64_t> prefix_bytes;  // size L + 1 (zeros without a limit).
  int64_t memory_limit = 0;           // 0: none.
  std::vector<int64_t> fixed_ns;      // h_{s−1} + h_s, size P.
  int min_layers = 1;
};

Inputs MakeInputs(const LayerSplitProblem& p) {
  Inputs in;
  in.layers = static_cast<int>(p.layer_compute.size());
  in.stages = p.pp;
  in.prefix_ns.assign(in.layers + 1, 0);
  in.prefix_bytes.assign(in.layers + 1, 0);
  for (int l = 0; l < in.layers; ++l) {
    in.prefix_ns[l + 1] = in.prefix_ns[l] + absl::ToInt64Nanoseconds(p.layer_compute[l]);
    in.prefix_bytes[l + 1] =
        in.prefix_bytes[l] + (p.layer_memory_bytes.empty() ? 0 : p.layer_memory_bytes[l]);
  }
  in.memory_limit = p.stage_memory_limit_bytes;
  in.fixed_ns.assign(p.pp, 0);
  for (int s = 0; s + 1 < p.pp && !p.boundary_p2p.empty(); ++s) {
    const int64_t h = absl::ToInt64Nanoseconds(p.boundary_p2p[s]);
    in.fixed_ns[s] += h;
    in.fixed_ns[s + 1] += h;
  }
  in.min_layers = p.min_layers_per_stage;
  return in;
}

// cycle of stage `s` holding layers [a, b) at `slowdown`.
int64_t Cycle(const Inputs& in, double slowdown, int s, int a, int b) {
  const double compute = slowdown * static_cast<double>(in.prefix_ns[b] - in.prefix_ns[a]);
  return static_cast<int64_t>(std::llround(compute)) + in.fixed_ns[s];
}

bool FitsMemory(const Inputs& in, int a, int b) {
  return in.memory_limit <= 0 || in.prefix_bytes[b] - in.prefix_bytes[a] <= in.memory_limit;
}

struct FrontPoint {
  SplitCost cost;
  StageSplit split;
};

// The split minimising (Σ cycle, then max cycle) lexicographically with every cycle <= cap;
// nullopt when none fits. O(P·L²).
std::optional<FrontPoint> BestUnderCap(const Inputs& in, const Profile& prof, int64_t cap) {
  const int L = in.layers, P = in.stages, k = in.min_layers;
  // best[s][j]: stages [0, s) cover layers [0, j). parent[s][j]: start of stage s − 1.
  std::vector<std::vector<SplitCost>> best(P + 1, std::vector<SplitCost>(L + 1, {kInf, kInf}));
  std::vector<std::vector<int>> parent(P + 1, std::vector<int>(L + 1, -1));
  best[0][0] = {0, 0};
  for (int s = 0; s < P; ++s) {
    // Stage s ends at j: stages after it need (P − 1 − s)·k layers.
    const int j_lo = (s + 1) * k, j_hi = L - (P - 1 - s) * k;
    for (int j = j_lo; j <= j_hi; ++j) {
      SplitCost here{kInf, kInf};
      int from = -1;
      for (int a = j - k; a >= s * k; --a) {
        if (!FitsMemory(in, a, j)) break;  // Longer stages only hold more.
        const int64_t c = Cycle(in, prof.slowdown[s], s, a, j);
        if (c > cap) break;  // Cycles only grow as the stage starts earlier.
        const SplitCost& prev = best[s][a];
        if (prev.sum == kInf) continue;
        const SplitCost cand{prev.sum + c, std::max(prev.max, c)};
        if (cand.sum < here.sum || (cand.sum == here.sum && cand.max < here.max)) {
          here = cand;
          from = a;
        }
      }
      best[s + 1][j] = here;
      parent[s + 1][j] = from;
    }
  }
  if (best[P][L].sum == kInf) return std::nullopt;
  FrontPoint out;
  out.cost = best[P][L];
  out.split.assign(P, 0);
  int j = L;
  for (int s = P; s >= 1; --s) {
    const int a = parent[s][j];
    out.split[s - 1] = a;
    j = a;
  }
  return out;
}

// The Pareto front of (max cycle, Σ cycle), max descending and Σ ascending. Empty when no split
// fits the memory limit.
std::vector<FrontPoint> Front(const Inputs& in, const Profile& prof) {
  std::vector<FrontPoint> front;
  int64_t cap = kInf;
  while (true) {
    std::optional<FrontPoint> p = BestUnderCap(in, prof, cap);
    if (!p.has_value()) break;
    front.push_back(*std::move(p));
    if (front.back().cost.max == 0) break;
    cap = front.back().cost.max - 1;
  }
  return front;
}

// T(m) = Σ cycle + (m − 1)·max cycle of one split.
int64_t PipelineNs(const SplitCost& c, int64_t m) {
  if (m <= 0) return 0;
  return c.sum + (m - 1) * c.max;
}

// min over the front of T(m), and the index of the point that gives it (the smaller max cycle on
// ties: the later point).
std::pair<int64_t, size_t> BestOnFront(const std::vector<FrontPoint>& front, int64_t m) {
  int64_t best = kInf;
  size_t at = 0;
  for (size_t i = 0; i < front.size(); ++i) {
    const int64_t t = PipelineNs(front[i].cost, m);
    if (t <= best) {
      best = t;
      at = i;
    }
  }
  return {best, at};
}

SplitCost CostOf(const Inputs& in, const Profile& prof, const StageSplit& split,
                 std::vector<absl::Duration>* cycles) {
  SplitCost c;
  cycles->clear();
  for (int s = 0; s < in.stages; ++s) {
    const int a = split[s], b = s + 1 < in.stages ? split[s + 1] : in.layers;
    const int64_t cyc = Cycle(in, prof.slowdown[s], s, a, b);
    c.sum += cyc;
    c.max = std::max(c.max, cyc);
    cycles->push_back(absl::Nanoseconds(cyc));
  }
  return c;
}

absl::Status ValidateSplit(const Inputs& in, const StageSplit& split, const std::string& field) {
  if (static_cast<int>(split.size()) != in.stages) {
    return Bad(field, absl::StrCat("has ", split.size(), " stages, want ", in.stages));
  }
  if (split[0] != 0) return Bad(field, "the first stage must start at layer 0");
  for (int s = 0; s < in.stages; ++s) {
    if (split[s] < 0 || split[s] >= in.layers) {
      return Bad(field, absl::StrCat("stage ", s, " starts at layer ", split[s], ", not in [0, ",
                                     in.layers, ")"));
    }
  }
  for (int s = 0; s < in.stages; ++s) {
    const int a = split[s], b = s + 1 < in.stages ? split[s + 1] : in.layers;
    if (b - a < in.min_layers) {
      return Bad(field, absl::StrCat("stage ", s, " holds ", b - a, " layers, fewer than ",
                                     in.min_layers));
    }
    if (!FitsMemory(in, a, b)) {
      return Bad(field, absl::StrCat("stage ", s, " exceeds the stage memory limit"));
    }
  }
  return absl::OkStatus();
}

std::vector<Profile> Profiles(const LayerSplitProblem& p, std::vector<int>* of_replica) {
  std::map<std::vector<double>, int> index;
  std::vector<Profile> out;
  of_replica->assign(p.dp, 0);
  for (int d = 0; d < p.dp; ++d) {
    std::vector<double> s(p.slowdowns.begin() + static_cast<ptrdiff_t>(d) * p.pp,
                          p.slowdowns.begin() + static_cast<ptrdiff_t>(d + 1) * p.pp);
    auto [it, added] = index.emplace(s, static_cast<int>(out.size()));
    if (added) out.push_back({std::move(s)});
    (*of_replica)[d] = it->second;
  }
  return out;
}

// Chooses m_d for replicas whose T_d(m) is `pipeline(profile, m)` (non-decreasing in m): the
// least makespan T for which every replica fits q micro-batches and the counts that fit sum to at
// least M (a binary search over integer T: the least such T is one of the T_d(m)), then counts
// above M taken back q at a time from the replica predicted to finish last (the highest DP index
// on ties, so lower indices keep more). O(63 · profiles · log(M/q)) evaluations of `pipeline`.
template <typename PipelineFn>
std::vector<int64_t> AllocateMicroBatches(const LayerSplitProblem& p,
                                          const std::vector<int>& of_replica, int profiles,
                                          PipelineFn pipeline) {
  const int64_t q = p.multiple, blocks_needed = p.global_micro_batches / p.multiple;
  const int64_t most = blocks_needed - (p.dp - 1);  // Most blocks one replica can take.
  std::vector<int64_t> count_of(profiles, 0);
  for (int d = 0; d < p.dp; ++d) ++count_of[of_replica[d]];
  // Blocks of profile `pr` that fit within t, in [0, most].
  auto fit = [&](int pr, int64_t t) {
    int64_t lo = 0, hi = most;  // pipeline(pr, q·lo) <= t (lo = 0 trivially).
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (pipeline(pr, q * mid) <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  };
  auto feasible = [&](int64_t t) {
    int64_t blocks = 0;
    for (int pr = 0; pr < profiles; ++pr) {
      if (count_of[pr] == 0) continue;
      const int64_t f = fit(pr, t);
      if (f == 0) return false;
      blocks += f * count_of[pr];
    }
    return blocks >= blocks_needed;
  };
  int64_t hi = 0;  // Feasible: every replica fits `most` blocks, and D·most >= M/q.
  for (int pr = 0; pr < profiles; ++pr) hi = std::max(hi, pipeline(pr, q * most));
  int64_t lo = 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (feasible(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::vector<int64_t> blocks(p.dp);
  int64_t total = 0;
  for (int d = 0; d < p.dp; ++d) {
    blocks[d] = fit(of_replica[d], lo);
    total += blocks[d];
  }
  using Entry = std::pair<int64_t, int>;  // (finish, d)
  std::priority_queue<Entry> last;
  for (int d = 0; d < p.dp; ++d) {
    if (blocks[d] > 1) last.push({pipeline(of_replica[d], q * blocks[d]), d});
  }
  while (total > blocks_needed && !last.empty()) {
    const int d = last.top().second;
    last.pop();
    --blocks[d];
    --total;
    if (blocks[d] > 1) last.push({pipeline(of_replica[d], q * blocks[d]), d});
  }
  std::vector<int64_t> m(p.dp);
  for (int d = 0; d < p.dp; ++d) m[d] = blocks[d] * q;
  return m;
}

LayerSplitPlan Assemble(const Inputs& in, const std::vector<Profile>& profiles,
                        const std::vector<int>& of_replica, const std::vector<StageSplit>& splits,
                        const std::vector<int64_t>& micro_batches, absl::Duration allreduce) {
  LayerSplitPlan plan;
  plan.replicas.resize(splits.size());
  int64_t slowest = -1;
  for (size_t d = 0; d < splits.size(); ++d) {
    ReplicaLayerPlan& r = plan.replicas[d];
    r.first_layer = splits[d];
    r.micro_batches = micro_batches[d];
    const SplitCost c = CostOf(in, profiles[of_replica[d]], splits[d], &r.cycles);
    const int64_t t = PipelineNs(c, micro_batches[d]);
    r.pipeline = absl::Nanoseconds(t);
    if (t > slowest) {
      slowest = t;
      plan.slowest_replica = static_cast<int>(d);
    }
  }
  plan.iteration = absl::Nanoseconds(slowest) + allreduce;
  return plan;
}

}  // namespace

absl::Status ValidateLayerSplitProblem(const LayerSplitProblem& p) {
  if (p.dp < 1 || p.dp > kMaxSplitReplicas) {
    return Bad("dp", absl::StrCat(p.dp, " not in [1, ", kMaxSplitReplicas, "]"));
  }
  if (p.pp < 1 || p.pp > kMaxSplitStages) {
    return Bad("pp", absl::StrCat(p.pp, " not in [1, ", kMaxSplitStages, "]"));
  }
  if (p.min_layers_per_stage < 1) {
    return Bad("min_layers_per_stage", absl::StrCat(p.min_layers_per_stage, " < 1"));
  }
  const int64_t layers = static_cast<int64_t>(p.layer_compute.size());
  if (layers < int64_t{p.pp} * p.min_layers_per_stage || layers > kMaxSplitLayers) {
    return Bad("layer_compute",
               absl::StrCat(layers, " layers, need [pp x min_layers_per_stage = ",
                            int64_t{p.pp} * p.min_layers_per_stage, ", ", kMaxSplitLayers, "]"));
  }
  for (int64_t l = 0; l < layers; ++l) {
    const absl::Duration t = p.layer_compute[l];
    if (t < absl::ZeroDuration() || absl::ToInt64Nanoseconds(t) > kMaxTimeNs) {
      return Bad(absl::StrCat("layer_compute[", l, "]"), "not in [0, 1000 s]");
    }
  }
  if (p.slowdowns.size() != static_cast<size_t>(p.dp) * p.pp) {
    return Bad("slowdowns", absl::StrCat("size ", p.slowdowns.size(),
                                         ", want dp x pp = ", static_cast<int64_t>(p.dp) * p.pp));
  }
  for (size_t i = 0; i < p.slowdowns.size(); ++i) {
    const double s = p.slowdowns[i];
    if (!(s >= 0.01 && s <= 1000)) {
      return Bad(absl::StrCat("slowdowns[", i, "]"), absl::StrCat(s, " not in [0.01, 1000]"));
    }
  }
  if (!p.boundary_p2p.empty() && p.boundary_p2p.size() != static_cast<size_t>(p.pp - 1)) {
    return Bad("boundary_p2p", absl::StrCat("size ", p.boundary_p2p.size(),
                                            ", want pp - 1 = ", p.pp - 1, " or none"));
  }
  for (size_t s = 0; s < p.boundary_p2p.size(); ++s) {
    const absl::Duration h = p.boundary_p2p[s];
    if (h < absl::ZeroDuration() || absl::ToInt64Nanoseconds(h) > kMaxTimeNs) {
      return Bad(absl::StrCat("boundary_p2p[", s, "]"), "not in [0, 1000 s]");
    }
  }
  if (p.allreduce < absl::ZeroDuration() || p.allreduce == absl::InfiniteDuration()) {
    return Bad("allreduce", "must be finite and >= 0");
  }
  if (p.multiple < 1 || p.multiple > kMaxMicroBatches) {
    return Bad("multiple", absl::StrCat(p.multiple, " not in [1, ", kMaxMicroBatches, "]"));
  }
  const int64_t M = p.global_micro_batches;
  if (M < p.multiple * p.dp || M > kMaxMicroBatches || M % p.multiple != 0) {
    return Bad("global_micro_batches", absl::StrCat(M, ": must be a multiple of ", p.multiple,
                                                    " in [dp x multiple = ", p.multiple * p.dp,
                                                    ", ", kMaxMicroBatches, "]"));
  }
  if (!p.layer_memory_bytes.empty()) {
    if (static_cast<int64_t>(p.layer_memory_bytes.size()) != layers) {
      return Bad("layer_memory_bytes",
                 absl::StrCat("size ", p.layer_memory_bytes.size(), ", want ", layers));
    }
    for (int64_t l = 0; l < layers; ++l) {
      if (p.layer_memory_bytes[l] < 0 || p.layer_memory_bytes[l] > (int64_t{1} << 50)) {
        return Bad(absl::StrCat("layer_memory_bytes[", l, "]"), "not in [0, 2^50]");
      }
    }
  }
  if (p.stage_memory_limit_bytes < 0) {
    return Bad("stage_memory_limit_bytes", absl::StrCat(p.stage_memory_limit_bytes, " < 0"));
  }
  if (p.stage_memory_limit_bytes > 0 && p.layer_memory_bytes.empty()) {
    return Bad("stage_memory_limit_bytes", "needs layer_memory_bytes");
  }
  // Products m·cycle stay in int64 ns.
  double total_s = 0, slowest = 0, p2p_s = 0;
  for (const absl::Duration& t : p.layer_compute) total_s += absl::ToDoubleSeconds(t);
  for (double s : p.slowdowns) slowest = std::max(slowest, s);
  for (const absl::Duration& h : p.boundary_p2p) p2p_s += 2 * absl::ToDoubleSeconds(h);
  if ((slowest * total_s + p2p_s) * 1e9 * static_cast<double>(M + p.pp) > 4e18) {
    return Bad(slowest * total_s >= p2p_s ? "layer_compute" : "boundary_p2p",
               "(Σ layer_compute x slowdown + 2 Σ boundary_p2p) x global_micro_batches overflows "
               "int64 nanoseconds");
  }
  // The front's dynamic program is O(P · L²) per point: bounded so one plan stays well under a
  // second at the largest sizes accepted.
  if (static_cast<double>(p.pp) * static_cast<double>(layers) * static_cast<double>(layers) > 2e8) {
    return Bad("layer_compute",
               absl::StrCat(layers, " layers x ", p.pp,
                            " stages: pp x layers^2 above 2e8 (too large to plan)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StageSplit> EvenStageSplit(int layers, int stages) {
  if (stages < 1 || stages > layers) {
    return Bad("stages", absl::StrCat(stages, " not in [1, layers = ", layers, "]"));
  }
  StageSplit split(stages);
  for (int s = 0; s < stages; ++s) {
    split[s] = static_cast<int>(static_cast<int64_t>(s) * layers / stages);
  }
  return split;
}

absl::StatusOr<LayerSplitPlan> PlanLayerSplit(const LayerSplitProblem& problem) {
  if (absl::Status s = ValidateLayerSplitProblem(problem); !s.ok()) return s;
  const Inputs in = MakeInputs(problem);
  std::vector<int> of_replica;
  const std::vector<Profile> profiles = Profiles(problem, &of_replica);
  std::vector<std::vector<FrontPoint>> fronts;
  int64_t points = 0;
  for (size_t pr = 0; pr < profiles.size(); ++pr) {
    fronts.push_back(Front(in, profiles[pr]));
    if (fronts.back().empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no split of ", in.layers, " layers into ", in.stages,
                       " stages fits stage_memory_limit_bytes ", in.memory_limit));
    }
    points += static_cast<int64_t>(fronts.back().size());
  }
  const std::vector<int64_t> m =
      AllocateMicroBatches(problem, of_replica, static_cast<int>(profiles.size()),
                           [&](int pr, int64_t mb) { return BestOnFront(fronts[pr], mb).first; });
  std::vector<StageSplit> splits(problem.dp);
  for (int d = 0; d < problem.dp; ++d) {
    const auto& front = fronts[of_replica[d]];
    splits[d] = front[BestOnFront(front, m[d]).second].split;
  }
  LayerSplitPlan plan = Assemble(in, profiles, of_replica, splits, m, problem.allreduce);
  plan.front_points = points;
  return plan;
}

absl::StatusOr<LayerSplitPlan> PlanMicroBatchesForSplits(const LayerSplitProblem& problem,
                                                         const std::vector<StageSplit>& splits) {
  if (absl::Status s = ValidateLayerSplitProblem(problem); !s.ok()) return s;
  const Inputs in = MakeInputs(problem);
  if (splits.size() != static_cast<size_t>(problem.dp)) {
    return Bad("splits", absl::StrCat("size ", splits.size(), ", want dp = ", problem.dp));
  }
  for (int d = 0; d < problem.dp; ++d) {
    if (absl::Status s = ValidateSplit(in, splits[d], absl::StrCat("splits[", d, "]")); !s.ok()) {
      return s;
    }
  }
  // Every replica its own profile: splits may differ.
  std::vector<Profile> profiles(problem.dp);
  std::vector<int> of_replica(problem.dp);
  std::vector<SplitCost> costs(problem.dp);
  std::vector<absl::Duration> scratch;
  for (int d = 0; d < problem.dp; ++d) {
    profiles[d].slowdown.assign(
        problem.slowdowns.begin() + static_cast<ptrdiff_t>(d) * problem.pp,
        problem.slowdowns.begin() + static_cast<ptrdiff_t>(d + 1) * problem.pp);
    of_replica[d] = d;
    costs[d] = CostOf(in, profiles[d], splits[d], &scratch);
  }
  const std::vector<int64_t> m = AllocateMicroBatches(
      problem, of_replica, problem.dp, [&](int d, int64_t mb) { return PipelineNs(costs[d], mb); });
  LayerSplitPlan plan = Assemble(in, profiles, of_replica, splits, m, problem.allreduce);
  plan.front_points = problem.dp;
  return plan;
}

absl::StatusOr<LayerSplitPlan> EvaluateLayerSplit(const LayerSplitProblem& problem,
                                                  const std::vector<StageSplit>& splits,
                                                  const std::vector<int64_t>& micro_batches) {
  if (absl::Status s = ValidateLayerSplitProblem(problem); !s.ok()) return s;
  const Inputs in = MakeInputs(problem);
  if (splits.size() != static_cast<size_t>(problem.dp)) {
    return Bad("splits", absl::StrCat("size ", splits.size(), ", want dp = ", problem.dp));
  }
  if (micro_batches.size() != static_cast<size_t>(problem.dp)) {
    return Bad("micro_batches",
               absl::StrCat("size ", micro_batches.size(), ", want dp = ", problem.dp));
  }
  int64_t total = 0;
  for (int d = 0; d < problem.dp; ++d) {
    if (absl::Status s = ValidateSplit(in, splits[d], absl::StrCat("splits[", d, "]")); !s.ok()) {
      return s;
    }
    const int64_t m = micro_batches[d];
    if (m < problem.multiple || m % problem.multiple != 0 || m > problem.global_micro_batches) {
      return Bad(absl::StrCat("micro_batches[", d, "]"),
                 absl::StrCat(m, " is not a positive multiple of ", problem.multiple,
                              " up to global_micro_batches"));
    }
    total += m;
  }
  if (total != problem.global_micro_batches) {
    return Bad("micro_batches",
               absl::StrCat("sum ", total, ", want ", problem.global_micro_batches));
  }
  std::vector<int> of_replica;
  const std::vector<Profile> profiles = Profiles(problem, &of_replica);
  return Assemble(in, profiles, of_replica, splits, micro_batches, problem.allreduce);
}

absl::StatusOr<RecoverableCeiling> CeilingOf(const LayerSplitProblem& problem,
                                             const std::vector<StageSplit>& baseline_splits,
                                             const std::vector<int64_t>& baseline_micro_batches,
                                             const LayerSplitPlan& plan) {
  absl::StatusOr<LayerSplitPlan> slowed =
      EvaluateLayerSplit(problem, baseline_splits, baseline_micro_batches);
  if (!slowed.ok()) return slowed.status();
  LayerSplitProblem healthy_problem = problem;
  std::fill(healthy_problem.slowdowns.begin(), healthy_problem.slowdowns.end(), 1.0);
  absl::StatusOr<LayerSplitPlan> healthy =
      EvaluateLayerSplit(healthy_problem, baseline_splits, baseline_micro_batches);
  if (!healthy.ok()) return healthy.status();
  RecoverableCeiling c;
  c.healthy = healthy->iteration;
  c.slowed = slowed->iteration;
  c.planned = plan.iteration;
  if (c.slowed > c.healthy) {
    c.recoverable = absl::FDivDuration(c.slowed - c.planned, c.slowed - c.healthy);
  }
  return c;
}

}  // namespace falcon::analysis::plan
