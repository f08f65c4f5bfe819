// shim_bench: the cost of the shim on the trainer's thread.
//   1. ns per Shim::RecordOp and per falcon_shim_record_op (C ABI), with the link thread draining
//      to an in-process FakeAgent over the unix socket (target <= 100 ns).
//   2. A/B overhead of a synthetic training loop whose ops are timed spins (compute + 8 ops per
//      iteration), with the shim (timestamps, RecordOp, a safe-point poll per iteration) versus
//      without, interleaved in the same run (target <= 0.2% of iteration time).
// Both are measured in the trainer thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which a busy,
// shared machine inflates far less than wall time; wall-clock figures are printed alongside.
// The synthetic ops are fixed amounts of arithmetic, so both arms do identical work.
// No arguments; prints a table. About 15 s on 2 cores.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/stats.h"
#include "trainer_shim/fake_agent.h"
#include "trainer_shim/falcon_shim.h"
#include "trainer_shim/shim.h"

namespace falcon::trainer_shim {
namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A fixed amount of work: a dependent chain of multiply-adds (no memory traffic, no syscalls).
uint64_t g_sink = 0;
void Work(uint64_t units) {
  uint64_t x = g_sink | 1;
  for (uint64_t i = 0; i < units; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

// Work units per nanosecond on this machine (the fastest of several runs, least disturbed).
double CalibrateUnitsPerNs() {
  constexpr uint64_t kUnits = 2'000'000;
  double best_ns = 1e18;
  for (int i = 0; i < 20; ++i) {
    const int64_t t0 = NowNs();
    Work(kUnits);
    best_ns = std::min(best_ns, static_cast<double>(NowNs() - t0));
  }
  return kUnits / best_ns;
}

OpRecord MakeOp(int64_t i) {
  OpRecord r;
  r.comm_id = 42;
  r.op_kind = OpKind::OP_KIND_ALL_REDUCE;
  r.bytes = 1 << 20;
  r.host_start_ns = i;
  r.host_end_ns = i + 1;
  return r;
}

ShimOptions Options(const std::string& socket) {
  ShimOptions o;
  o.job = "bench";
  o.agent_socket = socket;
  o.log = [](std::string_view) {};
  return o;
}

struct RecordCost {
  double cpp_ns = 0;  // Thread CPU time per record.
  double c_ns = 0;
  double cpp_wall_ns = 0;
  uint64_t dropped = 0;
  uint64_t delivered = 0;
  uint64_t accepted = 0;
};

constexpr int kBursts = 60;
constexpr int kBurst = 8192;  // With 40 ms pauses: never more than the ring holds.

// Records in bursts, pausing between them (outside the timed region) so the link thread drains
// the ring and streams to the agent, as it does when a trainer issues ops at realistic rates.
RecordCost MeasureRecordCost(const std::string& socket, FakeAgent* agent) {
  RecordCost out;
  auto shim = Shim::Create(Options(socket));
  if (!shim.ok()) return out;
  agent->WaitFor([&] { return (*shim)->stats().link.connected; });
  int64_t cpu = 0, wall = 0;
  for (int b = 0; b < kBursts; ++b) {
    const int64_t c0 = CpuNs(), w0 = NowNs();
    for (int i = 0; i < kBurst; ++i) (void)(*shim)->RecordOp(MakeOp(i));
    cpu += CpuNs() - c0;
    wall += NowNs() - w0;
    absl::SleepFor(absl::Milliseconds(40));
  }
  out.cpp_ns = static_cast<double>(cpu) / (kBursts * kBurst);
  out.cpp_wall_ns = static_cast<double>(wall) / (kBursts * kBurst);
  agent->WaitFor([&] { return (*shim)->stats().link.held_records == 0; }, absl::Seconds(30));
  const Shim::Stats s = (*shim)->stats();
  out.dropped = s.records_dropped_ring;
  out.accepted = s.records_accepted;
  out.delivered = s.link.records_acked;
  (*shim)->Shutdown();

  // The same through the C ABI (global shim).
  falcon_shim_options o;
  falcon_shim_options_init(&o);
  if (falcon_shim_init("bench", 0, 1, socket.c_str(), &o) != FALCON_SHIM_OK) return out;
  falcon_shim_op op{};
  op.comm_id = 42;
  op.op_kind = FALCON_SHIM_OP_ALL_REDUCE;
  op.bytes = 1 << 20;
  op.peer = -1;
  op.iteration = -1;
  cpu = 0;
  for (int b = 0; b < kBursts / 2; ++b) {
    const int64_t c0 = CpuNs();
    for (int i = 0; i < kBurst; ++i) {
      op.host_start_ns = i;
      op.host_end_ns = i + 1;
      (void)falcon_shim_record_op(&op);
    }
    cpu += CpuNs() - c0;
    absl::SleepFor(absl::Milliseconds(40));
  }
  out.c_ns = static_cast<double>(cpu) / (kBursts / 2 * kBurst);
  falcon_shim_shutdown();
  return out;
}

struct LoopShape {
  uint64_t compute_units = 0;  // Forward/backward stand-in: about 1 ms of work.
  int ops = 8;                 // Collectives per iteration.
  uint64_t op_units = 0;       // Each op: about 100 us of work.
};

struct Sample {
  double cpu_ns;
  double wall_ns;
};

// One iteration: compute, then `ops` timed ops; with a shim, a safe-point poll at the start and,
// per op, host timestamps and a record.
Sample Iteration(const LoopShape& shape, Shim* shim, int64_t iteration) {
  const int64_t c0 = CpuNs(), w0 = NowNs();
  if (shim != nullptr) (void)shim->PollDirectives(iteration, nullptr);
  Work(shape.compute_units);
  for (int k = 0; k < shape.ops; ++k) {
    const int64_t op_start = shim != nullptr ? NowNs() : 0;
    Work(shape.op_units);
    if (shim != nullptr) {
      OpRecord r = MakeOp(0);
      r.host_start_ns = op_start;
      r.host_end_ns = NowNs();
      (void)shim->RecordOp(r);
    }
  }
  return Sample{static_cast<double>(CpuNs() - c0), static_cast<double>(NowNs() - w0)};
}

struct AbResult {
  double base_us = 0;  // Median iteration CPU time without the shim.
  double shim_us = 0;
  double added_ns = 0;      // Median paired difference (CPU time per iteration).
  double added_se_ns = 0;   // Its standard error.
  double overhead_pct = 0;  // added_ns / base.
  double wall_overhead_pct = 0;
  double direct_ns = 0;  // The shim's own work per iteration, timed in isolation.
  double direct_pct = 0;
};

// The shim's work for one iteration (a poll, then per op two timestamps and a record), timed on
// its own in bursts the ring holds.
double MeasureDirect(Shim* shim, int ops) {
  constexpr int kBursts = 20;
  constexpr int kReps = 1000;
  int64_t cpu = 0;
  for (int b = 0; b < kBursts; ++b) {
    const int64_t c0 = CpuNs();
    for (int rep = 0; rep < kReps; ++rep) {
      (void)shim->PollDirectives(rep, nullptr);
      for (int k = 0; k < ops; ++k) {
        OpRecord r = MakeOp(0);
        r.host_start_ns = NowNs();
        r.host_end_ns = NowNs();
        (void)shim->RecordOp(r);
      }
    }
    cpu += CpuNs() - c0;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return static_cast<double>(cpu) / (kBursts * kReps);
}

// Iterations alternate between the arms in ABBA quads, so drift and interference hit both alike;
// the estimate is the median over quads of (shim - base) per iteration.
AbResult MeasureAb(const std::string& socket, FakeAgent* agent) {
  constexpr int kQuads = 1000;
  const double units_per_ns = CalibrateUnitsPerNs();
  LoopShape shape;
  shape.compute_units = static_cast<uint64_t>(1'000'000 * units_per_ns);
  shape.op_units = static_cast<uint64_t>(100'000 * units_per_ns);
  AbResult out;
  auto shim = Shim::Create(Options(socket));
  if (!shim.ok()) return out;
  agent->WaitFor([&] { return (*shim)->stats().link.connected; });
  std::vector<double> base_cpu, shim_cpu, base_wall, shim_wall, diffs;
  int64_t iteration = 0;
  for (int q = 0; q < kQuads; ++q) {
    double quad_base = 0, quad_shim = 0;
    for (int j = 0; j < 4; ++j) {
      const bool use_shim = j == 1 || j == 2;
      const Sample s = Iteration(shape, use_shim ? shim->get() : nullptr, iteration++);
      (use_shim ? shim_cpu : base_cpu).push_back(s.cpu_ns);
      (use_shim ? shim_wall : base_wall).push_back(s.wall_ns);
      (use_shim ? quad_shim : quad_base) += s.cpu_ns / 2;
    }
    diffs.push_back(quad_shim - quad_base);
  }
  out.direct_ns = MeasureDirect(shim->get(), shape.ops);
  (*shim)->Shutdown();
  const double base = common::Median(base_cpu);
  out.base_us = base / 1000;
  out.shim_us = common::Median(shim_cpu) / 1000;
  out.added_ns = common::Median(diffs);
  double mean = 0, var = 0;
  for (double d : diffs) mean += d / diffs.size();
  for (double d : diffs) var += (d - mean) * (d - mean) / (diffs.size() - 1);
  out.added_se_ns = 1.2533 * std::sqrt(var / diffs.size());
  out.overhead_pct = 100 * out.added_ns / base;
  out.wall_overhead_pct = 100 * (common::Median(shim_wall) / common::Median(base_wall) - 1);
  out.direct_pct = 100 * out.direct_ns / base;
  return out;
}

}  // namespace
}  // namespace falcon::trainer_shim

int main() {
  using falcon::trainer_shim::FakeAgent;
  const std::string socket = falcon::trainer_shim::TestSocketPath("bench_agent.sock");
  auto agent = FakeAgent::Start(socket);
  if (!agent.ok()) {
    std::fprintf(stderr, "cannot start the fake agent: %s\n",
                 std::string(agent.status().message()).c_str());
    return 1;
  }
  const falcon::trainer_shim::RecordCost cost =
      falcon::trainer_shim::MeasureRecordCost(socket, agent->get());
  const falcon::trainer_shim::AbResult ab = falcon::trainer_shim::MeasureAb(socket, agent->get());
  (*agent)->Stop();

  std::printf("%-56s %14s %10s\n", "figure", "value", "target");
  std::printf("%-56s %11.1f ns %10s\n", "Shim::RecordOp, per record (thread CPU)", cost.cpp_ns,
              "<= 100 ns");
  std::printf("%-56s %11.1f ns %10s\n", "Shim::RecordOp, per record (wall clock)", cost.cpp_wall_ns,
              "");
  std::printf("%-56s %11.1f ns %10s\n", "falcon_shim_record_op (C ABI), per record (CPU)",
              cost.c_ns, "<= 100 ns");
  std::printf("%-56s %14llu %10s\n", "records accepted (C++ run)",
              static_cast<unsigned long long>(cost.accepted), "");
  std::printf("%-56s %14llu %10s\n", "records acked by the agent (C++ run)",
              static_cast<unsigned long long>(cost.delivered), "= accepted");
  std::printf("%-56s %14llu %10s\n", "records dropped at the ring (C++ run)",
              static_cast<unsigned long long>(cost.dropped), "0");
  std::printf("%-56s %11.1f us %10s\n", "synthetic iteration without shim (1 ms + 8 x 100 us)",
              ab.base_us, "");
  std::printf("%-56s %11.1f us %10s\n", "synthetic iteration with shim", ab.shim_us, "");
  std::printf("%-56s %8.0f+-%-3.0f ns %10s\n", "A/B added CPU per iteration (median, +-SE)",
              ab.added_ns, ab.added_se_ns, "");
  std::printf("%-56s %12.3f %% %10s\n", "A/B overhead, iteration CPU time", ab.overhead_pct,
              "<= 0.2 %");
  std::printf("%-56s %12.3f %% %10s\n", "A/B overhead, iteration wall time (median; noisy)",
              ab.wall_overhead_pct, "");
  std::printf("%-56s %11.0f ns %10s\n", "shim work per iteration, timed alone (poll + 8 ops)",
              ab.direct_ns, "");
  std::printf("%-56s %12.3f %% %10s\n", "  as a share of the iteration", ab.direct_pct, "<= 0.2 %");
  return 0;
}
