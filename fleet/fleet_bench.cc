// fleet_bench: the controller at fleet scale (fleet/fleet_run.h). Runs the real falcon_controller
// against simulated agents over real gRPC at one iteration per --period: one TP 8 x PP 8 x DP
// N/64 job per size of --sizes with a compute (or --fault=link) fault, and --mixed_jobs concurrent
// jobs of mixed sizes (a quarter with a compute fault, a quarter with a link fault, half healthy).
// Iteration times follow the noise model fitted to the Alibaba PAI job 2 series in
// $FALCON_REAL_DATA
// (--replay: the series themselves). Prints one table (controller CPU, peak RSS, ingest,
// acknowledgement round trip, detection delay, alarm to verdict, validation tasks, Pause fan-out,
// verdicts) and the cost per rank with its log-log slope against N. Exits 1 when a verdict is
// wrong or a run fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/csv.h"
#include "fleet/fleet_run.h"

ABSL_FLAG(std::string, sizes, "1024,4096,16384",
          "ranks of the single-job runs (multiples of 64; 16384 is the target size)");
ABSL_FLAG(int, mixed_jobs, 64, "concurrent jobs of the mixed run (0: none)");
ABSL_FLAG(int, processes, 4, "agent processes");
ABSL_FLAG(absl::Duration, period, absl::Seconds(1), "wall time per iteration");
ABSL_FLAG(int64_t, onset, 30, "iteration of the first injected fault");
ABSL_FLAG(double, compute_factor, 1.2, "compute slowdown of the faulty rank (job: +0.6 x (f-1))");
ABSL_FLAG(double, link_factor, 1.6, "slowdown of the faulty link (job: +0.2 x (f-1))");
ABSL_FLAG(bool, replay, false, "replay the Alibaba PAI job 2 series instead of the fitted model");
ABSL_FLAG(absl::Duration, time_limit, absl::Minutes(15),
          "bound on each run (registering 16,384 ranks alone takes minutes)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the simulation");
ABSL_FLAG(std::string, fault, "compute", "fault of the single-job runs: compute or link");
ABSL_FLAG(int, detector_min_after, 3,
          "the controller's --detector_min_after: 3 decides a shift 2 iterations after its onset, "
          "for dedicated GPU nodes (the controller's default, 5, rides out 3-iteration bursts of a "
          "shared machine; docs/fleet.md)");
ABSL_FLAG(int, detector_recheck, 60,
          "the controller's --detector_recheck: 60 finds the 12% faults whose shift measured just "
          "under 10% at first (docs/fleet.md)");
ABSL_FLAG(bool, peer_timing, false,
          "the simulated agents send peer transfers, as with NCCL's profiler plugin (docs/gpu.md)");

namespace falcon::fleet {
namespace {

Scenario SingleJob(uint32_t ranks) {
  JobSpec j;
  j.layout.job = absl::StrCat("fleet-", ranks);
  j.layout.tp = 8;
  j.layout.pp = 8;
  j.layout.dp = ranks / 64;
  j.layout.ranks_per_node = 8;
  const bool link = absl::GetFlag(FLAGS_fault) == "link";
  j.fault.kind = link ? Fault::Kind::kLink : Fault::Kind::kCompute;
  j.fault.rank = ranks / 2 + 3;
  j.fault.factor = link ? absl::GetFlag(FLAGS_link_factor) : absl::GetFlag(FLAGS_compute_factor);
  j.fault.onset = absl::GetFlag(FLAGS_onset);
  return Scenario{{j}};
}

Scenario Mixed(int jobs) {
  Scenario s;
  const uint32_t shapes[][3] = {{8, 2, 2}, {8, 2, 4}, {8, 4, 4}, {4, 2, 2}};  // tp, pp, dp
  for (int i = 0; i < jobs; ++i) {
    JobSpec j;
    j.layout.job = absl::StrCat("mixed-", i);
    j.layout.tp = shapes[i % 4][0];
    j.layout.pp = shapes[(i / 4) % 4][1];
    j.layout.dp = shapes[(i / 4) % 4][2];
    j.layout.ranks_per_node = 8;
    const int64_t onset = absl::GetFlag(FLAGS_onset) + i % 8;
    if (i % 4 == 0) {
      j.fault = {Fault::Kind::kCompute, j.layout.world() - 1 - static_cast<uint32_t>(i) % 4,
                 absl::GetFlag(FLAGS_compute_factor), onset};
    } else if (i % 4 == 1) {
      j.fault = {Fault::Kind::kLink, static_cast<uint32_t>(i) % j.layout.world(),
                 absl::GetFlag(FLAGS_link_factor), onset};
    }
    s.jobs.push_back(j);
  }
  return s;
}

struct Row {
  std::string name;
  RunResult r;
};

double Slope(const std::vector<double>& n, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int k = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] <= 0 || y[i] <= 0) continue;
    const double x = std::log(n[i]), v = std::log(y[i]);
    sx += x;
    sy += v;
    sxx += x * x;
    sxy += x * v;
    ++k;
  }
  if (k < 2 || k * sxx - sx * sx == 0) return NAN;
  return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

int Run() {
  RunOptions base;
  base.processes = absl::GetFlag(FLAGS_processes);
  base.period = absl::GetFlag(FLAGS_period);
  base.seed = absl::GetFlag(FLAGS_seed);
  base.time_limit = absl::GetFlag(FLAGS_time_limit);
  base.peer_timing = absl::GetFlag(FLAGS_peer_timing);
  base.controller_flags.push_back(
      absl::StrCat("--detector_min_after=", absl::GetFlag(FLAGS_detector_min_after)));
  base.controller_flags.push_back(
      absl::StrCat("--detector_recheck=", absl::GetFlag(FLAGS_detector_recheck)));
  if (absl::GetFlag(FLAGS_fault) != "compute" && absl::GetFlag(FLAGS_fault) != "link") {
    std::fprintf(stderr, "fleet_bench: --fault=%s: want compute or link\n",
                 absl::GetFlag(FLAGS_fault).c_str());
    return 2;
  }
  const char* real = getenv("FALCON_REAL_DATA");
  const std::string csv = absl::StrCat(real != nullptr ? real : "/work/shared/real_data",
                                       "/alibaba_pai_minibatch_time/job_2_norm.csv");
  std::string noise = "default model (sigma 0.0165, phi 0.62): no Alibaba data";
  if (auto workers = common::ReadAlibabaPaiCsv(csv); workers.ok()) {
    if (absl::GetFlag(FLAGS_replay)) {
      base.replay_csv = csv;
      noise = absl::StrCat("replay of ", csv);
    } else if (auto fitted = FitNoiseModel(*workers); fitted.ok()) {
      base.noise = *fitted;
      noise =
          absl::StrCat("AR(1) fitted to ", csv, ": sigma ", fitted->sigma, ", phi ", fitted->phi);
    }
  }
  std::printf("noise: %s\n", noise.c_str());

  std::vector<Row> rows;
  bool ok = true;
  std::printf("%-16s %6s %6s %9s %7s %6s %7s %8s %7s %7s %6s %8s %6s %8s %8s %7s %6s\n", "run",
              "ranks", "iters", "reg s/cpu", "cores", "us/sum", "cores@1", "RSS MiB", "sum/s",
              "ack50ms", "ack99", "detect", "a->v s", "a->v it", "v.tasks", "fanout", "right");
  std::fflush(stdout);
  auto print = [&](const Row& row) {
    const RunResult& r = row.r;
    int64_t detect = -1, verdict_it = -1, tasks = 0;
    double verdict_s = -1, fanout = -1;
    int right = 0;
    for (const JobResult& j : r.jobs) {
      right += j.right;
      if (!j.right) {
        std::fprintf(stderr, "fleet_bench: %s: job %s: fault %d rank %u: %d events, verdict %s\n",
                     row.name.c_str(), j.job.c_str(), static_cast<int>(j.fault.kind), j.fault.rank,
                     j.events, j.verdict.c_str());
      }
      if (j.fault.kind == Fault::Kind::kNone) continue;
      detect = std::max(detect, j.detection_delay);
      verdict_it = std::max(verdict_it, j.alarm_to_verdict_iterations);
      verdict_s = std::max(verdict_s, j.alarm_to_verdict_s);
      tasks = std::max<int64_t>(tasks, j.validation_tasks);
      fanout = std::max(fanout, j.pause_fanout_ms);
    }
    ok = ok && r.all_right();
    if (r.late_polls > 0) {
      std::fprintf(stderr, "fleet_bench: %s: %d Control API polls not answered within 30 s\n",
                   row.name.c_str(), r.late_polls);
    }
    // Controller CPU per ingested summary, and the cores it makes at every rank's summary per
    // --period (the full rate, which a saturated machine may not reach: sum/s says).
    const double us_per_summary =
        r.summaries_per_s > 0 ? r.cpu_cores * 1e6 / r.summaries_per_s : -1;
    const double full_rate_cores = us_per_summary < 0
                                       ? -1
                                       : us_per_summary * 1e-6 * static_cast<double>(r.ranks) /
                                             absl::ToDoubleSeconds(absl::GetFlag(FLAGS_period));
    std::printf(
        "%-16s %6lu %6.0f %4.0f/%-4.0f %7.3f %6.1f %7.3f %8.1f %7.0f %7.2f %6.2f %8ld %6.2f %8ld "
        "%8ld %7.1f %3d/%-3zu\n",
        row.name.c_str(), static_cast<unsigned long>(r.ranks), r.iterations, r.registration_s,
        r.registration_cpu_s, r.cpu_cores, us_per_summary, full_rate_cores,
        static_cast<double>(r.peak_rss_bytes) / (1 << 20), r.summaries_per_s,
        absl::ToDoubleMilliseconds(r.ack_p50), absl::ToDoubleMilliseconds(r.ack_p99),
        static_cast<long>(detect), verdict_s, static_cast<long>(verdict_it),
        static_cast<long>(tasks), fanout, right, r.jobs.size());
    // Several jobs: the spread of detection behind the worst, and the jobs past the median.
    std::vector<int64_t> delays;
    for (const JobResult& j : r.jobs) {
      if (j.fault.kind != Fault::Kind::kNone && j.events > 0) delays.push_back(j.detection_delay);
    }
    if (delays.size() > 1) {
      std::sort(delays.begin(), delays.end());
      const int64_t median = delays[delays.size() / 2];
      std::string late;
      for (const JobResult& j : r.jobs) {
        if (j.fault.kind != Fault::Kind::kNone && j.events > 0 && j.detection_delay > median) {
          absl::StrAppend(&late, " ", j.job, ":", j.detection_delay);
        }
      }
      std::printf("  detection of %zu faults found: median %ld, max %ld iterations; later:%s\n",
                  delays.size(), static_cast<long>(median), static_cast<long>(delays.back()),
                  late.empty() ? " none" : late.c_str());
    }
    std::fflush(stdout);
  };
  for (absl::string_view size :
       absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',', absl::SkipEmpty())) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(size, &n) || n < 128 || n % 64 != 0) {
      std::fprintf(stderr, "fleet_bench: --sizes: %s is not a multiple of 64 >= 128\n",
                   std::string(size).c_str());
      return 2;
    }
    RunOptions o = base;
    o.scenario = SingleJob(n);
    std::fprintf(stderr, "fleet_bench: running %u ranks\n", n);
    absl::StatusOr<RunResult> r = RunFleet(o);
    if (!r.ok()) {
      std::fprintf(stderr, "fleet_bench: %u ranks: %s\n", n, r.status().ToString().c_str());
      return 1;
    }
    rows.push_back({absl::StrCat("1 job x ", n), *r});
    print(rows.back());
  }
  if (const int jobs = absl::GetFlag(FLAGS_mixed_jobs); jobs > 0) {
    RunOptions o = base;
    o.scenario = Mixed(jobs);
    std::fprintf(stderr, "fleet_bench: running %d mixed jobs\n", jobs);
    absl::StatusOr<RunResult> r = RunFleet(o);
    if (!r.ok()) {
      std::fprintf(stderr, "fleet_bench: mixed: %s\n", r.status().ToString().c_str());
      return 1;
    }
    rows.push_back({absl::StrCat(jobs, " jobs mixed"), *r});
    print(rows.back());
  }

  std::printf(
      "columns: reg s/cpu = registration (spawn to every agent registered): wall s / controller "
      "CPU s; cores = controller CPU (utime+stime)/wall; us/sum = controller CPU per "
      "ingested summary (us); cores@1 = us/sum x ranks / period, the cores at the full rate; "
      "RSS = VmHWM; sum/s = summaries "
      "ingested; ack = batch acknowledgement round trip; detect = alarm - onset "
      "(iterations, worst job); a->v = alarm to verdict (worst job); v.tasks = validation "
      "tasks (worst job); fanout = last - first agent receiving the Pause (ms); right = "
      "jobs judged right (faulted: cause and culprit; healthy: no event)\n");

  std::vector<double> n, cores, rss, ack, vs, tasks;
  for (const Row& row : rows) {
    if (row.r.jobs.size() != 1) continue;
    n.push_back(static_cast<double>(row.r.ranks));
    cores.push_back(row.r.cpu_cores);
    rss.push_back(static_cast<double>(row.r.peak_rss_bytes));
    ack.push_back(absl::ToDoubleMilliseconds(row.r.ack_p99));
    vs.push_back(row.r.jobs[0].alarm_to_verdict_s);
    tasks.push_back(row.r.jobs[0].validation_tasks);
  }
  if (n.size() >= 2) {
    std::printf("\n%-28s", "cost per rank at N =");
    for (double x : n) std::printf(" %12.0f", x);
    std::printf(" %10s\n", "slope");
    auto line = [&](const char* name, const std::vector<double>& y, double scale) {
      std::printf("%-28s", name);
      for (size_t i = 0; i < n.size(); ++i) std::printf(" %12.3f", y[i] * scale / n[i]);
      std::printf(" %10.2f\n", Slope(n, y));
    };
    line("controller CPU (ucores)", cores, 1e6);
    line("peak RSS (KiB)", rss, 1.0 / 1024);
    line("ack p99 (us)", ack, 1e3);
    line("alarm -> verdict (us)", vs, 1e6);
    line("validation tasks (x1e-3)", tasks, 1e3);
    std::printf("slope: d log(total cost) / d log N over the single-job runs (1 = linear in N)\n");
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace falcon::fleet

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return falcon::fleet::Run();
}
