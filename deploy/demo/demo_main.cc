// falcon_demo (`./falcon demo`): trains the reference job on a local cluster, injects the
// scenario's fail-slows, prints a live line per second, then a per-event summary, and writes the
// report folder (report.json, iterations.csv, timeline.png, index.html). See README.md.
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cli/help/flags_help.h"
#include "cluster/netns.h"
#include "common/logging/logging.h"
#include "deploy/demo/local_cluster_runner.h"
#include "deploy/demo/report_files.h"
#include "deploy/demo/runner.h"

ABSL_FLAG(std::string, scenario, "compute-link",
          "what to inject: compute-link (default), healthy, compute, link, dp-link, nic, nic-s4 "
          "(netns only), clears, blip, contention, restart");
ABSL_FLAG(std::string, layout, "4x2", "DPxPP of the reference trainer");
ABSL_FLAG(std::string, cluster, "",
          "netns: every emulated node a network namespace of its own, faults applied from outside "
          "the job by the kernel fault driver (needs root with CAP_NET_ADMIN); loopback: all on "
          "127.0.0.1, faults injected inside the trainer; default: netns where it can be created, "
          "else loopback");
ABSL_FLAG(int, nodes, 4, "emulated nodes (one agent each); must divide DP x PP");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(180),
          "training time budget; the run is sized to it and stopped at 1.5x it + 30s");
ABSL_FLAG(int64_t, iterations, 0, "training steps (0: sized from --duration)");
ABSL_FLAG(double, emulated_compute_ms, 5,
          "emulated device time per micro-batch forward (larger: less relative CPU noise)");
ABSL_FLAG(int, micro_batches, 0, "micro-batches per global batch (0: 8 x DP x PP)");
ABSL_FLAG(double, s3_cost_seconds, 3,
          "S3 cost for the escalation (controller default 60 s, sized for large jobs)");
ABSL_FLAG(bool, s2l, false,
          "let the controller take S2L (the layer split level), off by default as in the "
          "controller: over 10 compute runs on the netns cluster it recovered a median 0.78 of "
          "the slowdown against S2's 0.75 (deploy/demo/README.md)");
ABSL_FLAG(std::string, out, "falcon-demo-report", "report folder (created)");
ABSL_FLAG(std::string, json_report, "", "also copy report.json to this path");

namespace {

constexpr char kUsage[] =
    "falcon_demo: trains the reference job on a local emulated cluster, injects the scenario's "
    "fail-slows and writes a report folder.\n"
    "usage: falcon_demo [--scenario NAME] [--cluster netns|loopback] [--layout DxP] [--nodes N]\n"
    "                   [--duration 180s]\n"
    "                   [--iterations N] [--emulated_compute_ms MS] [--micro-batches M]\n"
    "                   [--s3_cost_seconds S] [--s2l] [--out DIR] [--json-report PATH]\n"
    "Flag names take dashes or underscores alike (--json-report = --json_report).\n";

// Set by the SIGINT / SIGTERM handler; the only state a handler may touch.
std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // A second Ctrl-C kills the demo at once.
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (falcon::cli::help::WantsHelp(argc,
                                   argv)) {  // Abseil's own --help lists no flags and exits 1.
    std::cout << falcon::cli::help::FlagsHelp(
        absl::StrCat(kUsage, falcon::common::logging::kLoggingUsage), "deploy/demo/demo_main.cc",
        /*dashes=*/false);
    return 0;
  }
  // Dashes or underscores in flag names (--json-report = --json_report); --microbatches (the
  // flag's old name) -> --micro_batches.
  std::vector<std::string> normalized =
      falcon::cli::help::NormalizeFlagNames(argc, argv, {{"microbatches", "micro_batches"}});
  std::vector<char*> raw;
  for (std::string& a : normalized) raw.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(raw.size()), raw.data());
  falcon::common::logging::InitLogging(argv[0]);

  absl::StatusOr<falcon::deploy::demo::Layout> layout =
      falcon::deploy::demo::ParseLayout(absl::GetFlag(FLAGS_layout));
  if (!layout.ok()) {
    std::cerr << "falcon_demo: " << layout.status().message() << "\n";
    return 2;
  }
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if (duration < absl::Seconds(20) || duration > absl::Hours(2)) {
    std::cerr << "falcon_demo: --duration must be between 20s and 2h, got "
              << absl::FormatDuration(duration) << "\n";
    return 2;
  }
  falcon::deploy::demo::RunOptions options;
  options.emulated_compute_ms = absl::GetFlag(FLAGS_emulated_compute_ms);
  options.micro_batches = absl::GetFlag(FLAGS_micro_batches);
  // Written so that NaN fails too.
  if (!(options.emulated_compute_ms > 0 && options.emulated_compute_ms <= 1000)) {
    std::cerr << "falcon_demo: --emulated_compute_ms must be in (0, 1000], got "
              << options.emulated_compute_ms << "\n";
    return 2;
  }
  if (options.micro_batches < 0 ||
      (options.micro_batches > 0 && options.micro_batches % layout->pp != 0)) {
    std::cerr << "falcon_demo: --micro-batches must be 0 or a multiple of PP (" << layout->pp
              << "), got " << options.micro_batches << "\n";
    return 2;
  }
  options.scenario.layout = *layout;  // For MicroBatches() below.
  int64_t iterations = absl::GetFlag(FLAGS_iterations);
  if (iterations == 0) {
    absl::Duration per_iteration = falcon::deploy::demo::EstimatedIterationTime(
        *layout, falcon::deploy::demo::MicroBatches(options), options.emulated_compute_ms);
    // ~15% of the budget goes to start-up and validation pauses.
    iterations = static_cast<int64_t>(0.85 * (duration / per_iteration));
    if (iterations < falcon::deploy::demo::kMinScenarioIterations) {
      const absl::Duration need =
          per_iteration * falcon::deploy::demo::kMinScenarioIterations / 0.85;
      std::cerr << "falcon_demo: --duration " << absl::FormatDuration(duration) << " gives only "
                << iterations << " iterations at about " << absl::FormatDuration(per_iteration)
                << " each; a scenario needs at least "
                << falcon::deploy::demo::kMinScenarioIterations << ": use --duration "
                << absl::FormatDuration(absl::Ceil(need, absl::Seconds(1))) << " or more\n";
      return 2;
    }
  }
  const std::string cluster_flag = absl::GetFlag(FLAGS_cluster);
  if (cluster_flag != "" && cluster_flag != "netns" && cluster_flag != "loopback") {
    std::cerr << "falcon_demo: --cluster must be netns or loopback, got '" << cluster_flag << "'\n";
    return 2;
  }
  bool netns = cluster_flag != "loopback";
  if (netns) {
    if (absl::Status s = falcon::cluster::CheckNetnsSupport(); !s.ok()) {
      if (cluster_flag == "netns") {
        std::cerr << "falcon_demo: --cluster netns: " << s.message() << "\n";
        return 2;
      }
      std::cout << "falcon demo: no netns cluster here (" << s.message()
                << "); running on the loopback cluster with faults injected inside the trainer\n";
      netns = false;
    }
  }
  absl::StatusOr<falcon::deploy::demo::Scenario> scenario = falcon::deploy::demo::MakeScenario(
      absl::GetFlag(FLAGS_scenario), *layout, absl::GetFlag(FLAGS_nodes), iterations,
      netns ? falcon::deploy::demo::FaultInjection::kKernel
            : falcon::deploy::demo::FaultInjection::kInProcess);
  if (!scenario.ok()) {
    std::cerr << "falcon_demo: " << scenario.status().message() << "\n";
    return 2;
  }
  options.scenario = *scenario;
  options.time_limit = duration * 1.5 + absl::Seconds(30);
  options.duration = duration;
  const std::string out = absl::GetFlag(FLAGS_out);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::cerr << "falcon_demo: --out: cannot create " << out << ": " << ec.message() << "\n";
    return 2;
  }
  const std::string json_report = absl::GetFlag(FLAGS_json_report);
  if (!json_report.empty()) {  // Fail now, not after the run.
    const bool existed = std::filesystem::exists(json_report, ec);
    if (!std::ofstream(json_report, std::ios::app)) {
      std::cerr << "falcon_demo: --json-report: cannot write " << json_report << "\n";
      return 2;
    }
    if (!existed) std::filesystem::remove(json_report, ec);
  }
  const double s3_cost = absl::GetFlag(FLAGS_s3_cost_seconds);
  if (!(s3_cost >= 0 && s3_cost <= 1e6)) {
    std::cerr << "falcon_demo: --s3_cost_seconds must be in [0, 1e6], got " << s3_cost << "\n";
    return 2;
  }
  options.work_dir = std::filesystem::absolute(out + "/run").string();
  // Agent sockets live in the work dir and unix socket paths must stay under 108 bytes.
  if (options.work_dir.size() > 70) {
    std::string tmpl = "/tmp/falcon-demo-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "falcon_demo: cannot create a work dir under /tmp\n";
      return 1;
    }
    options.work_dir = tmpl;
  }
  // A fresh RocksDB data dir every run: the previous run's folder goes, but only one this demo
  // made (its marker file inside), never a DIR/run of the user's that --out happens to hold.
  const std::string marker = options.work_dir + "/.falcon-demo-run";
  if (std::filesystem::exists(options.work_dir, ec) &&
      !std::filesystem::is_empty(options.work_dir, ec) && !std::filesystem::exists(marker, ec)) {
    std::cerr << "falcon_demo: --out: " << options.work_dir
              << " exists and is not a folder falcon_demo made (no .falcon-demo-run in it); the "
                 "demo replaces its run folder on every run, so it will not touch this one: "
                 "move it away or give another --out\n";
    return 2;
  }
  std::filesystem::remove_all(options.work_dir, ec);
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec || !std::ofstream(marker)) {
    std::cerr << "falcon_demo: --out: cannot create " << options.work_dir
              << (ec ? absl::StrCat(": ", ec.message()) : std::string()) << "\n";
    return 2;
  }
  options.live = [](const std::string& line) { std::cout << line << std::endl; };
  options.stop = &g_stop;
  options.settings = falcon::deploy::demo::DemoSettings();
  options.settings.set_s3_cost_seconds(s3_cost);
  options.settings.set_s2l_enabled(absl::GetFlag(FLAGS_s2l));
  InstallSignalHandlers();

  std::cout << "Falcon demo: scenario " << options.scenario.name << " ("
            << options.scenario.description << "), DP=" << layout->dp << " x PP=" << layout->pp
            << " on " << options.scenario.nodes << " emulated nodes, " << iterations
            << " iterations planned\n";
  for (const auto& f : options.scenario.faults) std::cout << "  inject: " << f.Describe() << "\n";
  std::cout << "  escalation costs: S3 " << s3_cost << " s, S4 "
            << (options.scenario.s4_cost_seconds > 0
                    ? absl::StrCat(options.scenario.s4_cost_seconds,
                                   " s (the scenario's: the small model's checkpoint and restart)")
                    : std::string("600 s (the controller's default)"))
            << "; S2L " << (absl::GetFlag(FLAGS_s2l) ? "on (--s2l)" : "off (--s2l turns it on)")
            << "\n";
  std::cout << "  cluster: "
            << (netns ? "netns (one network namespace per node on a bridge; faults from the "
                        "kernel fault driver, outside the job)"
                      : "loopback (faults injected inside the trainer)")
            << "\n";
  std::cout << "  warning: plaintext gRPC (no TLS between the demo's controller, agents and "
               "falconctl); a cluster uses mutual TLS (docs/operations.md#tls)\n";
  std::cout << "  logs and controller data: " << options.work_dir << "\n"
            << "live: time, iteration, iteration time, job state, active event (Ctrl-C stops)"
            << std::endl;

  absl::StatusOr<falcon::deploy::demo::Report> report =
      falcon::deploy::demo::RunScenario(options, falcon::deploy::demo::LocalClusterFactory());
  if (!report.ok()) {
    std::cerr << "falcon_demo: " << report.status().message() << "\n";
    return 1;
  }
  if (!report->note.empty()) std::cout << "run ended early: " << report->note << "\n";
  std::cout << "\n" << falcon::deploy::demo::SummaryText(*report);
  absl::Status written = falcon::deploy::demo::WriteReportFolder(*report, out);
  if (!written.ok()) std::cerr << "falcon_demo: report: " << written.message() << "\n";
  if (!json_report.empty()) {
    absl::Status s = falcon::deploy::demo::WriteTextFile(
        json_report, falcon::deploy::demo::ReportJson(*report).dump(2) + "\n");
    if (!s.ok()) std::cerr << "falcon_demo: --json-report: " << s.message() << "\n";
  }
  std::cout << "report: " << std::filesystem::absolute(out).string() << "/index.html\n";
  return report->interrupted ? 130 : (written.ok() ? 0 : 1);
}
