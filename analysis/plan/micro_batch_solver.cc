#include "analysis/plan/micro_batch_solver.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/plan/progression_select.h"

namespace falcon::analysis::plan {
namespace {

// The problem in whole blocks of q micro-batches: n_i = m_i / q, block time u_i = q·t_i (ns).
struct Blocks {
  std::vector<int> active;        // active DP indices, ascending
  std::vector<int64_t> block_ns;  // u_i per active group (parallel to `active`)
  int64_t blocks = 0;             // N = M / q
  int64_t multiple = 1;           // q
  size_t groups = 0;              // D
};

absl::StatusOr<Blocks> Validate(const MicroBatchProblem& problem) {
  Blocks b;
  b.groups = problem.micro_batch_times.size();
  if (b.groups == 0) {
    return absl::InvalidArgumentError("micro_batch_times: empty (D = 0 DP groups)");
  }
  if (!problem.excluded.empty() && problem.excluded.size() != b.groups) {
    return absl::InvalidArgumentError(absl::StrCat("excluded: has ", problem.excluded.size(),
                                                   " entries, want 0 or D = ", b.groups));
  }
  if (problem.multiple < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("multiple: must be >= 1, got ", problem.multiple));
  }
  const int64_t m = problem.global_micro_batches;
  if (m < 1 || m > kMaxGlobalMicroBatches) {
    return absl::InvalidArgumentError(absl::StrCat("global_micro_batches: must be in [1, ",
                                                   kMaxGlobalMicroBatches, "], got ", m));
  }
  if (m % problem.multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_micro_batches: ", m, " is not a multiple of multiple = ", problem.multiple));
  }
  b.multiple = problem.multiple;
  b.blocks = m / problem.multiple;
  for (size_t i = 0; i < b.groups; ++i) {
    if (!problem.excluded.empty() && problem.excluded[i]) continue;
    const absl::Duration t = problem.micro_batch_times[i];
    if (t < absl::Nanoseconds(1) || t > kMaxMicroBatchTime) {
      return absl::InvalidArgumentError(absl::StrCat(
          "micro_batch_times[", i, "]: must be in [1ns, ", absl::FormatDuration(kMaxMicroBatchTime),
          "], got ", absl::FormatDuration(t)));
    }
    b.active.push_back(static_cast<int>(i));
    // q·t <= M·t <= 4e6 · 1e12 ns: fits in int64.
    b.block_ns.push_back(problem.multiple * absl::ToInt64Nanoseconds(t));
  }
  if (b.active.empty()) {
    return absl::InvalidArgumentError("excluded: every DP group is excluded");
  }
  const int64_t active = static_cast<int64_t>(b.active.size());
  if (b.blocks < active) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_micro_batches: ", m, " < active groups (", active, ") x multiple (",
                     problem.multiple, ") = ", active * problem.multiple,
                     "; every active group needs at least one block of q micro-batches"));
  }
  return b;
}

// Fills makespan/min/spread from per-active-group block counts.
MicroBatchSplit MakeSplit(const Blocks& b, const std::vector<int64_t>& n) {
  MicroBatchSplit split;
  split.micro_batches.assign(b.groups, 0);
  int64_t max_ns = 0;
  int64_t min_ns = INT64_MAX;
  for (size_t j = 0; j < b.active.size(); ++j) {
    split.micro_batches[b.active[j]] = n[j] * b.multiple;
    const int64_t finish = n[j] * b.block_ns[j];
    max_ns = std::max(max_ns, finish);
    min_ns = std::min(min_ns, finish);
  }
  split.makespan = absl::Nanoseconds(max_ns);
  split.min_finish = absl::Nanoseconds(min_ns);
  split.spread = absl::Nanoseconds(max_ns - min_ns);
  return split;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a >= 0, b > 0

}  // namespace

absl::StatusOr<MicroBatchSplit> SolveMicroBatches(const MicroBatchProblem& problem) {
  absl::StatusOr<Blocks> validated = Validate(problem);
  if (!validated.ok()) return validated.status();
  const Blocks& b = *validated;
  const size_t d = b.active.size();
  const int64_t n_total = b.blocks;
  const int64_t u_min = *std::min_element(b.block_ns.begin(), b.block_ns.end());
  const int64_t u_max = *std::max_element(b.block_ns.begin(), b.block_ns.end());

  // All products k·u_i, k >= 1. Any rank r <= N has its r-th smallest product <= N·u_min (the
  // fastest group alone has N products up to there), so truncating each progression at
  // N·u_min / u_i loses nothing we select.
  std::vector<Progression> all(d);
  for (size_t j = 0; j < d; ++j) {
    all[j] = Progression{b.block_ns[j], 1, std::max<int64_t>(1, n_total * u_min / b.block_ns[j])};
  }

  // 1. Makespan. A makespan T is feasible iff T >= u_max (each group runs >= 1 block) and
  // Σ floor(T/u_i) >= N, i.e. at least N products are <= T. So T* = max(u_max, P_N) where P_r
  // is the r-th smallest product.
  const int64_t makespan = std::max(u_max, SelectValue(all, n_total));
  std::vector<int64_t> hi(d);
  int64_t low_cap = INT64_MAX;  // largest L such that every group has a multiple in [L, T*]
  for (size_t j = 0; j < d; ++j) {
    hi[j] = makespan / b.block_ns[j];
    low_cap = std::min(low_cap, hi[j] * b.block_ns[j]);
  }

  // 2. Largest achievable minimum finish time L. With lo_i(L) = ceil(L/u_i), L is feasible iff
  // lo_i <= hi_i for all i (L <= low_cap) and Σ lo_i <= N. Σ lo_i = D + #{products < L}, so the
  // second condition is L <= P_{N-D+1}. Both bounds are products, hence L* is their minimum.
  const int64_t min_finish =
      std::min(low_cap, SelectValue(all, n_total - static_cast<int64_t>(d) + 1));
  std::vector<int64_t> n(d);
  int64_t assigned = 0;
  for (size_t j = 0; j < d; ++j) {
    n[j] = std::max<int64_t>(1, CeilDiv(min_finish, b.block_ns[j]));
    assigned += n[j];
  }

  // 3. Least squares for the remaining R blocks: Σ (n_i·u_i)² is separable and convex, and the
  // k-th block of group i adds (2k − 1)·u_i², increasing in k; so the R smallest of these
  // marginal costs over k in (lo_i, hi_i] are an optimal choice. Ties at the threshold go to the
  // lowest DP index.
  const int64_t remaining = n_total - assigned;
  if (remaining > 0) {
    std::vector<OddProgression> extra(d);
    for (size_t j = 0; j < d; ++j) {
      const Int128 u = b.block_ns[j];
      extra[j] = OddProgression{u * u, n[j] + 1, hi[j]};
    }
    const Int128 threshold = SelectValue(extra, remaining);
    int64_t left = remaining;
    for (size_t j = 0; j < d; ++j) {
      const int64_t below = CountAtMost(extra[j], threshold - 1);
      n[j] += below;
      left -= below;
    }
    for (size_t j = 0; j < d && left > 0; ++j) {
      if (n[j] + 1 <= hi[j] &&
          (2 * static_cast<Int128>(n[j] + 1) - 1) * extra[j].weight == threshold) {
        ++n[j];
        --left;
      }
    }
  }
  return MakeSplit(b, n);
}

absl::StatusOr<MicroBatchSplit> SolveMicroBatches(std::vector<absl::Duration> micro_batch_times,
                                                  int64_t global_micro_batches, int64_t multiple) {
  MicroBatchProblem problem;
  problem.micro_batch_times = std::move(micro_batch_times);
  problem.global_micro_batches = global_micro_batches;
  problem.multiple = multiple;
  return SolveMicroBatches(problem);
}

absl::StatusOr<MicroBatchSplit> EvenMicroBatches(const MicroBatchProblem& problem) {
  absl::StatusOr<Blocks> validated = Validate(problem);
  if (!validated.ok()) return validated.status();
  const Blocks& b = *validated;
  const int64_t d = static_cast<int64_t>(b.active.size());
  std::vector<int64_t> n(b.active.size(), b.blocks / d);
  for (int64_t j = 0; j < b.blocks % d; ++j) ++n[j];
  return MakeSplit(b, n);
}

absl::StatusOr<MicroBatchSplit> EvaluateMicroBatches(const MicroBatchProblem& problem,
                                                     const std::vector<int64_t>& micro_batches) {
  absl::StatusOr<Blocks> validated = Validate(problem);
  if (!validated.ok()) return validated.status();
  const Blocks& b = *validated;
  if (micro_batches.size() != b.groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batches: has ", micro_batches.size(), " entries, want D = ", b.groups));
  }
  std::vector<int64_t> n;
  int64_t sum = 0;
  size_t next_active = 0;
  for (size_t i = 0; i < b.groups; ++i) {
    const int64_t m = micro_batches[i];
    const bool active =
        next_active < b.active.size() && b.active[next_active] == static_cast<int>(i);
    if (!active) {
      if (m != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("micro_batches[", i, "]: group is excluded, want 0, got ", m));
      }
      continue;
    }
    ++next_active;
    if (m < b.multiple || m % b.multiple != 0 || m > problem.global_micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "micro_batches[", i, "]: must be a positive multiple of ", b.multiple, ", got ", m));
    }
    n.push_back(m / b.multiple);
    sum += m;
  }
  if (sum != problem.global_micro_batches) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro_batches: sum is ", sum, ", want M = ", problem.global_micro_batches));
  }
  return MakeSplit(b, n);
}

absl::StatusOr<std::vector<absl::Duration>> MicroBatchTimesFromSeconds(
    const std::vector<double>& seconds, const std::string& field) {
  std::vector<absl::Duration> times;
  times.reserve(seconds.size());
  for (size_t i = 0; i < seconds.size(); ++i) {
    const double s = seconds[i];
    if (std::isnan(s)) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "]: is NaN"));
    }
    if (!std::isfinite(s) || s <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: must be a finite number of seconds > 0, got ", s));
    }
    times.push_back(absl::Seconds(s));
  }
  return times;
}

}  // namespace falcon::analysis::plan
