// fleet_agents: one process of simulated node agents of a fleet run (fleet/agents.h). Connects
// the agents of nodes [--from, --to) of --scenario to the controller at --target, prints "ready"
// on stdout, waits until --go_file exists, drives iterations until SIGTERM or SIGINT, then writes
// what the agents saw to --report (FleetReport::Serialize) and exits 0.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/csv.h"
#include "common/mutex_mode.h"
#include "fleet/agents.h"
#include "fleet/scenario.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, target, "", "controller address host:port");
ABSL_FLAG(std::string, scenario, "", "jobs and faults (fleet/scenario.h)");
ABSL_FLAG(int64_t, from, 0, "first simulated node (index into the scenario's nodes)");
ABSL_FLAG(int64_t, to, 0, "end of the simulated nodes (exclusive)");
ABSL_FLAG(absl::Duration, period, absl::Seconds(1), "wall time per iteration");
ABSL_FLAG(uint64_t, seed, 1, "seed of the noise and jitter (the same in every process)");
ABSL_FLAG(double, noise_sigma, 0.0165, "noise model: stationary relative deviation");
ABSL_FLAG(double, noise_phi, 0.62, "noise model: lag-1 autocorrelation");
ABSL_FLAG(std::string, replay_csv, "",
          "Alibaba PAI per-worker CSV to replay instead of the noise model (empty: the model)");
ABSL_FLAG(absl::Duration, directive_latency, absl::Milliseconds(20), "agent -> shim latency");
ABSL_FLAG(absl::Duration, gemm_latency, absl::Milliseconds(50), "time to answer a GEMM task");
ABSL_FLAG(absl::Duration, link_latency, absl::Milliseconds(100), "time to answer a link pass");
ABSL_FLAG(std::string, go_file, "", "iterations start once this file exists (empty: at once)");
ABSL_FLAG(std::string, report, "", "where the report goes at exit");
ABSL_FLAG(bool, peer_timing, false,
          "raw ops carry peer transfers, as with NCCL's profiler plugin (docs/gpu.md)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  falcon::common::SetReleaseMutexMode();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // Every thread inherits it; one waits for them.
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    stop = true;
  });
  waiter.detach();

  absl::StatusOr<falcon::fleet::Scenario> scenario =
      falcon::fleet::ParseScenario(absl::GetFlag(FLAGS_scenario));
  if (!scenario.ok()) {
    std::fprintf(stderr, "fleet_agents: --scenario: %s\n", scenario.status().ToString().c_str());
    return 2;
  }
  falcon::fleet::AgentsOptions o;
  o.target = absl::GetFlag(FLAGS_target);
  o.period = absl::GetFlag(FLAGS_period);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.noise.sigma = absl::GetFlag(FLAGS_noise_sigma);
  o.noise.phi = absl::GetFlag(FLAGS_noise_phi);
  o.peer_timing = absl::GetFlag(FLAGS_peer_timing);
  o.directive_latency = absl::GetFlag(FLAGS_directive_latency);
  o.gemm_latency = absl::GetFlag(FLAGS_gemm_latency);
  o.link_latency = absl::GetFlag(FLAGS_link_latency);
  if (const std::string csv = absl::GetFlag(FLAGS_replay_csv); !csv.empty()) {
    auto workers = falcon::common::ReadAlibabaPaiCsv(csv);
    if (!workers.ok()) {
      std::fprintf(stderr, "fleet_agents: --replay_csv: %s\n", workers.status().ToString().c_str());
      return 2;
    }
    o.noise = falcon::fleet::ReplayModel(*workers);
  }
  falcon::fleet::AgentProcess process(*scenario, static_cast<size_t>(absl::GetFlag(FLAGS_from)),
                                      static_cast<size_t>(absl::GetFlag(FLAGS_to)), o);
  if (absl::Status s = process.ConnectAll(absl::Seconds(120)); !s.ok()) {
    std::fprintf(stderr, "fleet_agents: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  const std::string go = absl::GetFlag(FLAGS_go_file);
  while (!go.empty() && !stop && !std::filesystem::exists(go))
    absl::SleepFor(absl::Milliseconds(5));
  process.Run(stop);
  if (const std::string path = absl::GetFlag(FLAGS_report); !path.empty()) {
    std::ofstream out(path + ".tmp");
    out << process.Report().Serialize();
    out.close();
    std::filesystem::rename(path + ".tmp", path);
  }
  return 0;
}
