// falcon-controller: the Falcon control plane (./falcon controller ARGS).
//   --listen HOST:PORT          gRPC (Telemetry + Control, reflection on); port 0 = any free port
//   --metrics_listen HOST:PORT  Prometheus /metrics; "" = off; port 0 = any free port
//   --data_dir DIR              RocksDB state (jobs, events, directives, settings, history)
//   --store_repair              start on a damaged store by repairing it (what was lost is logged)
//   --mitigation                S1-S4 mitigation installed (default true; =false: verdicts only)
//   --retention DURATION        ended jobs, events and directives are purged this long after
//   --max_ranks_per_job N, --max_jobs_per_agent N, --max_streams_per_peer N   resource limits
//   --stream_idle_timeout, --keepalive_time, --keepalive_timeout          dead-stream detection
//   --tls_cert FILE, --tls_key FILE, --tls_ca FILE   mutual TLS on --listen (required unless
//                               --plaintext, for a local demo: logged as a warning)
// Prints "listening on HOST:PORT" and "metrics on HOST:PORT" on stdout once serving; SIGINT or
// SIGTERM shuts down cleanly (ControllerServer::Shutdown), each step a glog line. Every flag is
// checked before anything starts (addresses, paths, durations finite and within the range its
// help states, no positional arguments): a bad one exits 2 with a message naming it.
#include <glog/logging.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/help/flags_help.h"
#include "common/clock.h"
#include "common/flag_checks.h"
#include "common/host_port.h"
#include "common/logging/logging.h"
#include "common/mutex_mode.h"
#include "common/names.h"
#include "common/version.h"
#include "controller/mitigation/orchestrator.h"
#include "controller/service/controller_server.h"
#include "proto/grpc_tls.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of the controller, for mutual TLS on --listen "
          "(docs/operations.md#tls)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s) that sign the agents' and falconctl users' certificates");
ABSL_FLAG(absl::Duration, tls_refresh, absl::Seconds(60),
          "how often the TLS files are read again (rotation without dropping streams), "
          "[1s, 24h]");
ABSL_FLAG(bool, plaintext, false,
          "serve without TLS (a local demo only; logged as a warning); otherwise --tls_cert, "
          "--tls_key and --tls_ca are required");
ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "gRPC listen address HOST:PORT, port in [0, 65535] (0: any free)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9470",
          "Prometheus /metrics address HOST:PORT (port 0: any; empty: no endpoint)");
ABSL_FLAG(std::string, data_dir, "falcon-controller-data",
          "RocksDB directory (created if missing; must not be a file)");
ABSL_FLAG(bool, sync_writes, true,
          "acknowledge telemetry only once the RocksDB log is fsynced (false: once the OS has it; "
          "a power loss can then lose acknowledged batches)");
ABSL_FLAG(bool, store_repair, false,
          "start on a damaged store (data_dir) by repairing it; what the damage lost is logged "
          "and counted (falcon_controller_store_repair_lost). Without it a damaged store is "
          "refused (DATA_LOSS naming the file)");
ABSL_FLAG(std::string, controller_id, "",
          "ControllerHello.controller_id, 1 to 256 bytes of UTF-8 (default: "
          "falcon-controller@<host name>)");
ABSL_FLAG(absl::Duration, tick, absl::Seconds(1),
          "period of timeouts and housekeeping, [10ms, 1m]");
ABSL_FLAG(int, profiling_iterations, 3, "job iterations profiled before validation, [1, 1000]");
ABSL_FLAG(int, detector_min_after, 5,
          "observations at a new level before the online detector decides, [1, 10]: the detection "
          "delay is min_after - 1 iterations and bursts of up to min_after - 2 iterations are no "
          "change; 4 reaches a slowdown an iteration sooner and lets 3-iteration bursts through");
ABSL_FLAG(int, detector_recheck, 0,
          "observations after a proposed change that failed verification during which it is "
          "verified again on the longer stretch, [0, 10000]; 0: never (the paper). 60 finds 12% "
          "steps in stable series whose shift measured just under the threshold at first, at the "
          "price of more events at exactly the threshold on noisy workers (docs/algorithms.md)");
ABSL_FLAG(int, validation_gemm_size, 1024, "validation GEMM size m = n = k, [1, 65536]");
ABSL_FLAG(int, validation_repeats, 3, "timed repetitions of each validation test, [1, 100]");
ABSL_FLAG(int, validation_pause_lead_iterations, 2,
          "the validation pause's effective iteration leads the job's latest complete iteration "
          "by this many, [0, 1000]");
ABSL_FLAG(int64_t, validation_link_bytes, int64_t{64} << 20,
          "bytes per link-pass message, [1, 2^30]");
ABSL_FLAG(double, validation_link_slow_ratio, 0.10,
          "a link slower than (1 + this) x its communicator's median is a culprit, (0, 10]");
ABSL_FLAG(double, validation_gemm_slow_ratio, 0.10,
          "a rank's GEMM slower than (1 + this) x the median is a culprit, (0, 10]");
ABSL_FLAG(absl::Duration, job_end_grace, absl::Seconds(120),
          "a job without any connected agent for this long ends, [1s, 7d]");
ABSL_FLAG(bool, mitigation, true,
          "install mitigation (S1-S4 with escalation; per-job settings still apply); false: "
          "verdicts end at LOCALIZED");
ABSL_FLAG(std::string, s4_checkpoint_dir, "falcon-s4",
          "S4: checkpoint directory sent to the ranks (relative: under the trainer's "
          "--checkpoint-dir); not empty");
ABSL_FLAG(absl::Duration, directive_ack_timeout, absl::Seconds(60),
          "a directive not applied by every target within this long is TIMED_OUT, [1s, 24h]");
ABSL_FLAG(absl::Duration, retention, absl::Hours(24),
          "ended jobs (with their events, directives, history and settings), and recovered or "
          "closed events and final directives of running jobs, are purged this long after they "
          "ended, [1s, 365d]");
ABSL_FLAG(uint32_t, max_ranks_per_job, 16384,
          "largest world_size a job may register (RESOURCE_EXHAUSTED beyond), [1, 1048576]");
ABSL_FLAG(uint32_t, max_jobs_per_agent, 256,
          "most jobs one agent may have a part in (RESOURCE_EXHAUSTED beyond), [1, 1000000]");
ABSL_FLAG(uint32_t, max_streams_per_peer, 64,
          "most open agent and watch streams from one peer host (RESOURCE_EXHAUSTED beyond), "
          "[1, 1000000]");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "an agent stream with no message or heartbeat for this long is closed and its agent "
          "marked disconnected (must exceed the agents' heartbeat_interval), [1s, 24h]");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(30),
          "HTTP/2 keepalive: ping every connection this often (0: no pings), [0, 24h]");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(10),
          "HTTP/2 keepalive: close a connection whose ping is not answered within this long, "
          "[1s, 24h]");
ABSL_FLAG(absl::Duration, directive_delivery_latency, absl::Seconds(2),
          "controller -> rank delivery latency (incl. telemetry lag) the effective iteration of a "
          "plan directive must cover, [0, 10m]");

namespace {

constexpr char kUsage[] =
    "falcon-controller: Falcon control plane (detection, localization, mitigation).\n"
    "usage: falcon_controller [--listen HOST:PORT] [--metrics_listen HOST:PORT] "
    "[--data_dir DIR] [flags]\n";

std::string Host(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

falcon::proto::TlsFiles TlsFlags() {
  return {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)};
}

// The checks of every flag that the libraries would take silently or report later without the
// flag's name. The first failure, naming the flag.
absl::Status CheckFlags() {
  if (const std::string listen = absl::GetFlag(FLAGS_listen); !absl::StartsWith(listen, "unix:")) {
    if (absl::Status s =
            falcon::common::ParseHostPort(listen, "--listen", falcon::common::PortZero::kAnyFree)
                .status();
        !s.ok()) {
      return s;
    }
  }
  if (const std::string metrics = absl::GetFlag(FLAGS_metrics_listen); !metrics.empty()) {
    if (absl::Status s = falcon::common::ParseHostPort(metrics, "--metrics_listen",
                                                       falcon::common::PortZero::kAnyFree)
                             .status();
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s =
          falcon::common::CheckDirectoryPath(absl::GetFlag(FLAGS_data_dir), "--data_dir");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          falcon::common::CheckPath(absl::GetFlag(FLAGS_s4_checkpoint_dir), "--s4_checkpoint_dir");
      !s.ok()) {
    return s;
  }
  if (const std::string id = absl::GetFlag(FLAGS_controller_id);
      !id.empty() && !falcon::common::IsValidAgentId(id)) {
    return absl::InvalidArgumentError("--controller_id: must be 1 to 256 bytes of UTF-8");
  }
  if (absl::Status s = falcon::common::CheckDurationsIn({
          // Below 10ms the housekeeping loop spins a core (1ns: 45% CPU idle); inf stops it.
          {"--tick", absl::GetFlag(FLAGS_tick), absl::Milliseconds(10), absl::Minutes(1)},
          {"--job_end_grace", absl::GetFlag(FLAGS_job_end_grace), absl::Seconds(1),
           absl::Hours(7 * 24)},
          {"--directive_ack_timeout", absl::GetFlag(FLAGS_directive_ack_timeout), absl::Seconds(1),
           absl::Hours(24)},
          {"--directive_delivery_latency", absl::GetFlag(FLAGS_directive_delivery_latency),
           absl::ZeroDuration(), absl::Minutes(10)},
          {"--retention", absl::GetFlag(FLAGS_retention), absl::Seconds(1), absl::Hours(365 * 24)},
          {"--stream_idle_timeout", absl::GetFlag(FLAGS_stream_idle_timeout), absl::Seconds(1),
           absl::Hours(24)},
          {"--keepalive_time", absl::GetFlag(FLAGS_keepalive_time), absl::ZeroDuration(),
           absl::Hours(24)},
          {"--keepalive_timeout", absl::GetFlag(FLAGS_keepalive_timeout), absl::Seconds(1),
           absl::Hours(24)},
          {"--tls_refresh", absl::GetFlag(FLAGS_tls_refresh), absl::Seconds(1), absl::Hours(24)},
      });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = falcon::common::CheckIntegersIn({
          {"--profiling_iterations", absl::GetFlag(FLAGS_profiling_iterations), 1, 1000},
          {"--detector_min_after", absl::GetFlag(FLAGS_detector_min_after), 1, 10},
          {"--detector_recheck", absl::GetFlag(FLAGS_detector_recheck), 0, 10000},
          {"--validation_gemm_size", absl::GetFlag(FLAGS_validation_gemm_size), 1, 65536},
          {"--validation_repeats", absl::GetFlag(FLAGS_validation_repeats), 1, 100},
          {"--validation_pause_lead_iterations",
           absl::GetFlag(FLAGS_validation_pause_lead_iterations), 0, 1000},
          {"--validation_link_bytes", absl::GetFlag(FLAGS_validation_link_bytes), 1,
           int64_t{1} << 30},
          {"--max_ranks_per_job", absl::GetFlag(FLAGS_max_ranks_per_job), 1, 1 << 20},
          {"--max_jobs_per_agent", absl::GetFlag(FLAGS_max_jobs_per_agent), 1, 1'000'000},
          {"--max_streams_per_peer", absl::GetFlag(FLAGS_max_streams_per_peer), 1, 1'000'000},
      });
      !s.ok()) {
    return s;
  }
  for (const auto& [flag, ratio] :
       {std::pair<const char*, double>{"--validation_link_slow_ratio",
                                       absl::GetFlag(FLAGS_validation_link_slow_ratio)},
        std::pair<const char*, double>{"--validation_gemm_slow_ratio",
                                       absl::GetFlag(FLAGS_validation_gemm_slow_ratio)}}) {
    if (!(ratio > 0 && ratio <= 10)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", ratio, " is not in (0, 10]"));
    }
  }
  return falcon::proto::CheckTlsSettings(TlsFlags(), absl::GetFlag(FLAGS_plaintext), "--");
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena for every thread (before any thread starts): the state the loop frees (ended
  // jobs purged by retention) then goes back to the system instead of staying resident in one
  // arena per thread that once allocated (glibc creates up to 8 per core).
  mallopt(M_ARENA_MAX, 1);
  absl::SetProgramUsageMessage(kUsage);
  falcon::common::InstallVersionFlag("falcon-controller");
  if (falcon::cli::help::WantsHelp(argc,
                                   argv)) {  // Abseil's own --help lists no flags and exits 1.
    std::fputs(
        falcon::cli::help::FlagsHelp(absl::StrCat(kUsage, falcon::common::logging::kLoggingUsage),
                                     "controller/controller_main.cc", /*dashes=*/false)
            .c_str(),
        stdout);
    return 0;
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  falcon::common::logging::InitLogging(argv[0]);
  falcon::common::SetReleaseMutexMode();
  if (absl::Status s = falcon::common::CheckNoPositionals(positional); !s.ok()) {
    std::cerr << "falcon-controller: " << s.message() << "\n";
    return 2;
  }
  if (absl::Status s = CheckFlags(); !s.ok()) {
    std::cerr << "falcon-controller: " << s.message() << "\n";
    return 2;
  }

  // Block the shutdown signals in every thread; main waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // SIGHUP (what operators send to reload) must not kill the controller: the TLS files are re-read
  // every --tls_refresh anyway (docs/operations.md#tls), so it is logged and nothing else.
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  falcon::controller::service::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.tls = TlsFlags();
  options.tls_refresh = absl::GetFlag(FLAGS_tls_refresh);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.sync_writes = absl::GetFlag(FLAGS_sync_writes);
  options.store_repair = absl::GetFlag(FLAGS_store_repair);
  options.tick_interval = absl::GetFlag(FLAGS_tick);
  options.version = falcon::common::kFalconVersion;
  std::string id = absl::GetFlag(FLAGS_controller_id);
  if (id.empty()) {
    char host[256] = {0};
    id = gethostname(host, sizeof(host) - 1) == 0 ? absl::StrCat("falcon-controller@", host)
                                                  : "falcon-controller";
  }
  options.controller.controller_id = id;
  options.controller.localization.profiling_iterations = absl::GetFlag(FLAGS_profiling_iterations);
  options.controller.detection.detector.min_after = absl::GetFlag(FLAGS_detector_min_after);
  options.controller.detection.detector.recheck = absl::GetFlag(FLAGS_detector_recheck);
  options.controller.job_end_grace = absl::GetFlag(FLAGS_job_end_grace);
  options.controller.directives.ack_timeout = absl::GetFlag(FLAGS_directive_ack_timeout);
  options.controller.directives.delivery_latency = absl::GetFlag(FLAGS_directive_delivery_latency);
  options.controller.retention.retention = absl::GetFlag(FLAGS_retention);
  options.controller.resource_limits.max_ranks_per_job = absl::GetFlag(FLAGS_max_ranks_per_job);
  options.controller.resource_limits.max_jobs_per_agent = absl::GetFlag(FLAGS_max_jobs_per_agent);
  options.controller.resource_limits.max_streams_per_peer =
      absl::GetFlag(FLAGS_max_streams_per_peer);
  options.controller.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  options.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  options.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  {
    auto& loc = options.controller.localization;
    const int gemm = absl::GetFlag(FLAGS_validation_gemm_size);  // Ranges: CheckFlags.
    const int repeats = absl::GetFlag(FLAGS_validation_repeats);
    const int64_t bytes = absl::GetFlag(FLAGS_validation_link_bytes);
    loc.gemm_size = static_cast<uint32_t>(gemm);
    loc.repeats = static_cast<uint32_t>(repeats);
    loc.link_bytes = static_cast<uint64_t>(bytes);
    loc.pause_lead_iterations = absl::GetFlag(FLAGS_validation_pause_lead_iterations);
    loc.verdict.link_slow_ratio = absl::GetFlag(FLAGS_validation_link_slow_ratio);
    loc.verdict.gemm_slow_ratio = absl::GetFlag(FLAGS_validation_gemm_slow_ratio);
  }

  falcon::common::RealClock clock;
  falcon::controller::mitigation::OrchestratorOptions mitigation;
  mitigation.checkpoint_dir = absl::GetFlag(FLAGS_s4_checkpoint_dir);
  falcon::controller::mitigation::Orchestrator orchestrator(mitigation, &clock);
  auto server = falcon::controller::service::ControllerServer::Start(
      options, &clock, absl::GetFlag(FLAGS_mitigation) ? &orchestrator : nullptr);
  if (!server.ok()) {
    std::cerr << "falcon-controller: " << server.status() << "\n";
    return 1;
  }
  LOG(INFO) << "controller started controller_id=" << id << " listen=" << Host(options.listen)
            << ":" << (*server)->port() << " data_dir=" << options.data_dir
            << " mitigation=" << (absl::GetFlag(FLAGS_mitigation) ? "on" : "off")
            << " version=" << falcon::common::kFalconVersion;
  std::cout << "listening on " << Host(options.listen) << ":" << (*server)->port() << std::endl;
  if (!options.metrics_listen.empty()) {
    std::cout << "metrics on " << Host(options.metrics_listen) << ":" << (*server)->metrics_port()
              << std::endl;
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    LOG(INFO) << "SIGHUP received: nothing to reload by signal; the TLS files are re-read every "
              << absl::FormatDuration(options.tls_refresh) << " (--tls_refresh)";
  }
  LOG(INFO) << "shutdown requested signal=" << (sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  LOG(INFO) << "controller stopped controller_id=" << id;
  return 0;
}
