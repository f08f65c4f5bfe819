#include "deploy/demo/scenario.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace falcon::deploy::demo {

std::string Layout::ToString() const { return absl::StrCat(dp, "x", pp); }

absl::StatusOr<Layout> ParseLayout(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::ByAnyChar("xX"));
  Layout layout;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &layout.dp) ||
      !absl::SimpleAtoi(parts[1], &layout.pp)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: expected DPxPP such as 4x2, got '", text, "'"));
  }
  if (layout.dp < 1 || layout.pp < 1 || layout.dp > 64 || layout.pp > 64 ||
      layout.dp * layout.pp > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: DP and PP must be >= 1 with DP x PP <= 64, got '", text, "'"));
  }
  return layout;
}

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kCompute:
      return "compute";
    case FaultKind::kLink:
      return "link";
    case FaultKind::kContention:
      return "contention";
  }
  return "?";
}

std::string InjectedFault::ToSpec() const {
  std::string window = absl::StrCat("from=", from_iteration, ",to=", to_iteration);
  switch (kind) {
    case FaultKind::kCompute:
      return absl::StrFormat("compute:rank=%d,factor=%g,%s", rank, factor, window);
    case FaultKind::kLink:
      return absl::StrFormat(
          "link:src=%d,dst=%d,delay_ms=%g,%s%s", src_rank, dst_rank, delay_ms,
          bandwidth_mbps > 0 ? absl::StrFormat("bw_mbps=%g,", bandwidth_mbps) : std::string(),
          window);
    case FaultKind::kContention:
      return absl::StrFormat("contention:rank=%d,workers=%d,%s", rank, workers, window);
  }
  return "";
}

std::string InjectedFault::Describe() const {
  std::string window = absl::StrCat("iterations [", from_iteration, ", ", to_iteration, ")");
  switch (kind) {
    case FaultKind::kCompute:
      return absl::StrFormat("compute x%g on rank %d, %s", factor, rank, window);
    case FaultKind::kLink:
      return absl::StrFormat("link %d->%d +%g ms per message%s, %s", src_rank, dst_rank, delay_ms,
                             bandwidth_mbps > 0
                                 ? absl::StrFormat(", capped at %g Mbit/s", bandwidth_mbps)
                                 : std::string(),
                             window);
    case FaultKind::kContention:
      return absl::StrFormat("CPU contention (%d stress-ng workers) on rank %d, %s", workers, rank,
                             window);
  }
  return "";
}

std::string Scenario::FaultSpec() const {
  std::vector<std::string> items;
  for (const InjectedFault& f : faults) items.push_back(f.ToSpec());
  return absl::StrJoin(items, "; ");
}

std::vector<std::string> ScenarioNames() {
  return {"compute-link", "healthy", "compute", "link", "blip", "contention", "restart"};
}

int NodeOf(int rank, int world, int nodes) {
  if (nodes <= 0 || world <= 0) return 0;
  return rank / std::max(1, world / nodes);
}

namespace {

int64_t At(int64_t iterations, double fraction) {
  return static_cast<int64_t>(std::llround(static_cast<double>(iterations) * fraction));
}

// A stage-0 rank of a DP group other than the first (rank == its DP index).
InjectedFault ComputeFault(const Layout& layout, double factor, int64_t from, int64_t to) {
  InjectedFault f;
  f.kind = FaultKind::kCompute;
  f.rank = std::min(2, layout.dp - 1);
  f.factor = factor;
  f.from_iteration = from;
  f.to_iteration = to;
  f.expected_cause = "COMPUTE";
  f.expected_strategy = "S2";
  return f;
}

// The stage 0 -> stage 1 activation link of a DP group whose two ranks sit on different nodes,
// preferring DP group 1 (not the compute fault's group).
absl::StatusOr<InjectedFault> LinkFault(const Layout& layout, int nodes, int64_t from, int64_t to) {
  for (int i = 0; i < layout.dp; ++i) {
    int g = (1 + i) % layout.dp;
    int src = g;  // (dp g, pp 0)
    int dst = g + layout.dp;
    if (NodeOf(src, layout.world(), nodes) == NodeOf(dst, layout.world(), nodes)) continue;
    InjectedFault f;
    f.kind = FaultKind::kLink;
    f.src_rank = src;
    f.dst_rank = dst;
    // The per-message delay slows training (small activation messages); the bandwidth cap is
    // what validation's 64 MiB link tests see.
    f.delay_ms = 6;
    f.bandwidth_mbps = 1000;
    f.from_iteration = from;
    f.to_iteration = to;
    f.expected_cause = "COMMUNICATION";
    f.expected_strategy = "S3";
    return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("nodes: no pipeline link crosses nodes with --layout ", layout.ToString(),
                   " on ", nodes, " nodes; use more nodes"));
}

}  // namespace

absl::StatusOr<Scenario> MakeScenario(absl::string_view name, const Layout& layout, int nodes,
                                      int64_t iterations) {
  if (nodes < 1 || layout.world() % nodes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: ", nodes, " does not divide the ",
                                                   layout.world(), " ranks of --layout ",
                                                   layout.ToString()));
  }
  if (iterations < kMinScenarioIterations) {
    return absl::InvalidArgumentError(absl::StrCat("iterations: a scenario needs at least ",
                                                   kMinScenarioIterations, ", got ", iterations));
  }
  Scenario s;
  s.name = std::string(name);
  s.layout = layout;
  s.nodes = nodes;
  s.iterations = iterations;
  const int64_t n = iterations;
  bool needs_dp = false, needs_pp = false;
  if (name == "compute-link") {
    needs_dp = needs_pp = true;
  } else if (name == "compute" || name == "blip" || name == "contention" || name == "restart") {
    needs_dp = true;
  } else if (name == "link") {
    needs_pp = true;
  } else if (name != "healthy") {
    return absl::InvalidArgumentError(absl::StrCat("--scenario: unknown '", name, "'; one of ",
                                                   absl::StrJoin(ScenarioNames(), ", ")));
  }
  if (needs_dp && layout.dp < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: scenario ", name, " needs at least 2 DP groups"));
  }
  if (needs_pp && layout.pp < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: scenario ", name, " needs at least 2 pipeline stages"));
  }
  if (name == "healthy") {
    s.description = "healthy run, no fault: Falcon must stay quiet";
  } else if (name == "compute-link") {
    s.description = "compute fail-slow on one rank, then a slow link between two nodes";
    s.faults.push_back(ComputeFault(layout, 1.5, At(n, 0.25), At(n, 0.57)));
    absl::StatusOr<InjectedFault> link = LinkFault(layout, nodes, At(n, 0.66), At(n, 0.97));
    if (!link.ok()) return link.status();
    s.faults.push_back(*link);
  } else if (name == "compute") {
    s.description = "compute fail-slow x1.5 on one rank";
    s.faults.push_back(ComputeFault(layout, 1.5, At(n, 0.3), At(n, 0.95)));
  } else if (name == "link") {
    s.description = "slow link between two ranks on different nodes";
    absl::StatusOr<InjectedFault> link = LinkFault(layout, nodes, At(n, 0.3), At(n, 0.95));
    if (!link.ok()) return link.status();
    s.faults.push_back(*link);
  } else if (name == "blip") {
    s.description = "transient 5% blip on one rank: below threshold, must be ignored";
    InjectedFault f =
        ComputeFault(layout, 1.05, At(n, 0.5), At(n, 0.5) + std::max<int64_t>(10, At(n, 0.05)));
    f.expect_event = false;
    f.expected_cause.clear();
    f.expected_strategy.clear();
    s.faults.push_back(f);
  } else if (name == "contention") {
    s.description = "real CPU contention (stress-ng) on one rank's CPU";
    InjectedFault f = ComputeFault(layout, 1.0, At(n, 0.3), At(n, 0.95));
    f.kind = FaultKind::kContention;
    f.workers = 2;
    f.expected_strategy.clear();
    s.faults.push_back(f);
    s.pin_cpus = true;
    // Contention slows real CPU work, not emulated (slept) device time: a CPU-bound model.
    s.train_args = {"--emulated_compute_ms=0", "--hidden=128", "--embed=32", "--batch=32"};
  } else if (name == "restart") {
    s.description = "compute fail-slow with a controller restart mid-event";
    s.faults.push_back(ComputeFault(layout, 1.5, At(n, 0.25), At(n, 0.95)));
    s.restart_controller_at_iteration = At(n, 0.55);
  }
  return s;
}

}  // namespace falcon::deploy::demo
