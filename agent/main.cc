// falcon-agent: Falcon's node agent (`./falcon agent ARGS`). See agent/agent.h and
// agent/options.h for what it does and every setting; `--help` lists the flags.
//
// Exit codes: 0 after a clean SIGTERM/SIGINT drain (also when the controller did not acknowledge
// everything in time: that is reported, not an error), 1 when the agent cannot start (socket or
// port in use), 2 for bad flags or config.
#include <glog/logging.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "agent/agent.h"
#include "agent/options.h"
#include "cli/help/flags_help.h"
#include "common/clock.h"
#include "common/flag_checks.h"
#include "common/logging/logging.h"
#include "common/mutex_mode.h"
#include "common/version.h"

namespace falcon::agent {

// A setting given on the command line, or not. Unlike std::optional<std::string>, for which
// Abseil reads `--flag=` as "unset", an empty value is a value: `--metrics_listen=` disables
// /metrics (it used to leave the default 0.0.0.0:9464 in place) and `--controller=` is refused.
struct SettingFlag {
  std::optional<std::string> value;
};

bool AbslParseFlag(absl::string_view text, SettingFlag* flag, std::string*) {
  flag->value = std::string(text);
  return true;
}

std::string AbslUnparseFlag(const SettingFlag& flag) { return flag.value.value_or(""); }

}  // namespace falcon::agent

// Every flag is optional: unset flags leave the config file's value or the default in place.
#define FALCON_AGENT_FLAG(name, help) \
  ABSL_FLAG(falcon::agent::SettingFlag, name, falcon::agent::SettingFlag{}, help)

FALCON_AGENT_FLAG(controller, "controller address HOST:PORT, port in [1, 65535] (required)");
FALCON_AGENT_FLAG(tls_cert,
                  "this node's PEM certificate, naming the node (docs/operations.md#tls)");
FALCON_AGENT_FLAG(tls_key, "PEM private key of --tls_cert");
FALCON_AGENT_FLAG(tls_ca, "PEM certificate of the cluster CA (verifies the controller)");
FALCON_AGENT_FLAG(plaintext,
                  "true: no TLS to the controller, for a local demo only (logged as a warning); "
                  "otherwise --tls_cert, --tls_key and --tls_ca are required (default false)");
FALCON_AGENT_FLAG(socket, "unix socket the shims attach to (default /run/falcon/agent.sock)");
FALCON_AGENT_FLAG(socket_group, "group owning the socket, mode 0660 (default: the agent's group)");
FALCON_AGENT_FLAG(socket_uids,
                  "comma-separated uids whose shims may connect, besides the agent's own uid, "
                  "root and the socket group (default none)");
FALCON_AGENT_FLAG(socket_gids,
                  "comma-separated primary gids whose shims may connect, besides the socket "
                  "group (default none)");
FALCON_AGENT_FLAG(node, "node name (default: the host name)");
FALCON_AGENT_FLAG(agent_id, "stable agent id, the controller's dedup key (default: node)");
FALCON_AGENT_FLAG(metrics_listen,
                  "HOST:PORT for /metrics; port 0 picks one; empty (--metrics_listen=) disables "
                  "(default 0.0.0.0:9464)");
FALCON_AGENT_FLAG(summary_interval,
                  "flush period of iteration summaries, in [1ms, 60s] (default 1s)");
FALCON_AGENT_FLAG(buffer_batches,
                  "telemetry batches held while the controller is away, in [1, 2^20] (default "
                  "4096)");
FALCON_AGENT_FLAG(buffer_bytes,
                  "bytes held while the controller is away, in [1, 2^36] (default 64 MiB)");
FALCON_AGENT_FLAG(backoff_initial, "first reconnect delay, in [1ms, 10m] (default 100ms)");
FALCON_AGENT_FLAG(backoff_max, "longest reconnect delay, in [backoff_initial, 1h] (default 30s)");
FALCON_AGENT_FLAG(backoff_jitter, "relative jitter of reconnect delays, in [0, 1) (default 0.2)");
FALCON_AGENT_FLAG(seed, "seed of the jitter generator (default 1)");
FALCON_AGENT_FLAG(heartbeat_interval,
                  "heartbeat period on an idle stream, in [10ms, 10m] (default 5s)");
FALCON_AGENT_FLAG(drain_timeout,
                  "on SIGTERM, how long to wait for the controller's acks, in [0, 10m] (default "
                  "10s)");
FALCON_AGENT_FLAG(hint_hold,
                  "how long a hinted iteration waits for late ops, in [0, 10m] (default 5s)");
FALCON_AGENT_FLAG(match_hold,
                  "how long an iteration waits for other ranks' matching ops, in [0, 10m] "
                  "(default 2s)");
FALCON_AGENT_FLAG(job_idle_timeout,
                  "forget a job this long after its last shim left, in [1s, 7d] (default 10m)");
FALCON_AGENT_FLAG(max_raw_ops_per_rank,
                  "raw op records held per profiled rank between flushes, in [1, 2^26] (default "
                  "1048576)");
ABSL_FLAG(std::string, config, "",
          "optional config file: JSON object or `key = value` lines, keys as the flags; flags "
          "given on the command line override it");

namespace {

constexpr char kUsage[] =
    "Falcon node agent: serves the shims of the training ranks on this node, reduces their op "
    "timings to per-iteration summaries and streams them to the controller.\n"
    "usage: falcon_agent --controller HOST:PORT [--socket PATH] [--config FILE] [flags]\n"
    "Exit status: 0 after a SIGTERM/SIGINT drain, 1 when it cannot start, 2 for bad flags.\n";

struct FlagKey {
  absl::Flag<falcon::agent::SettingFlag>* flag;
  const char* key;
};

int Run() {
  const std::vector<FlagKey> flags = {
      {&FLAGS_controller, "controller"},
      {&FLAGS_socket, "socket"},
      {&FLAGS_socket_group, "socket_group"},
      {&FLAGS_socket_uids, "socket_uids"},
      {&FLAGS_socket_gids, "socket_gids"},
      {&FLAGS_node, "node"},
      {&FLAGS_agent_id, "agent_id"},
      {&FLAGS_metrics_listen, "metrics_listen"},
      {&FLAGS_tls_cert, "tls_cert"},
      {&FLAGS_tls_key, "tls_key"},
      {&FLAGS_tls_ca, "tls_ca"},
      {&FLAGS_plaintext, "plaintext"},
      {&FLAGS_summary_interval, "summary_interval"},
      {&FLAGS_buffer_batches, "buffer_batches"},
      {&FLAGS_buffer_bytes, "buffer_bytes"},
      {&FLAGS_backoff_initial, "backoff_initial"},
      {&FLAGS_backoff_max, "backoff_max"},
      {&FLAGS_backoff_jitter, "backoff_jitter"},
      {&FLAGS_seed, "seed"},
      {&FLAGS_heartbeat_interval, "heartbeat_interval"},
      {&FLAGS_drain_timeout, "drain_timeout"},
      {&FLAGS_hint_hold, "hint_hold"},
      {&FLAGS_match_hold, "match_hold"},
      {&FLAGS_job_idle_timeout, "job_idle_timeout"},
      {&FLAGS_max_raw_ops_per_rank, "max_raw_ops_per_rank"},
  };
  falcon::agent::AgentOptions options;
  options.version = falcon::common::kFalconVersion;
  if (const std::string config = absl::GetFlag(FLAGS_config); !config.empty()) {
    if (absl::Status s = falcon::agent::ApplyConfigFile(config, &options); !s.ok()) {
      std::fprintf(stderr, "falcon-agent: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  for (const FlagKey& f : flags) {
    const std::optional<std::string> value = absl::GetFlag(*f.flag).value;
    if (!value.has_value()) continue;
    if (absl::Status s = falcon::agent::ApplyValue(f.key, *value, &options); !s.ok()) {
      std::fprintf(stderr, "falcon-agent: --%s\n", std::string(s.message()).c_str());
      return 2;
    }
  }

  // Signals are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // SIGHUP must not kill the agent: its TLS files are read again at every (re)connection.
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  falcon::common::RealClock clock;
  auto agent = falcon::agent::Agent::Start(options, clock);
  if (!agent.ok()) {
    std::fprintf(stderr, "falcon-agent: %s\n", agent.status().ToString().c_str());
    return agent.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const falcon::agent::AgentOptions& o = (*agent)->options();
  if (o.plaintext) {
    LOG(WARNING) << "plaintext gRPC to the controller " << o.controller
                 << ": no TLS, the stream can be read and forged on the network (local demo only; "
                    "set tls_cert, tls_key, tls_ca)";
  }
  std::printf("falcon-agent %s: node %s, agent_id %s, shim socket %s, controller %s\n",
              falcon::common::kFalconVersion, o.node.c_str(), o.agent_id.c_str(),
              o.socket_path.c_str(), o.controller.c_str());
  if (!(*agent)->metrics_address().empty()) {
    std::printf("metrics on %s\n", (*agent)->metrics_address().c_str());
  }
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    LOG(INFO) << "SIGHUP received: nothing to reload by signal; the TLS files are read again at "
                 "every connection to the controller";
  }
  std::printf("falcon-agent: %s received, draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  absl::Status drained = (*agent)->Drain(o.drain_timeout);
  if (drained.ok()) {
    std::printf("falcon-agent: drained: no batch left unacknowledged\n");
  } else {
    std::printf("falcon-agent: drained with loss: %s\n", drained.ToString().c_str());
  }
  std::fflush(stdout);
  agent->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  falcon::common::InstallVersionFlag("falcon-agent");
  if (falcon::cli::help::WantsHelp(argc,
                                   argv)) {  // Abseil's own --help lists no flags and exits 1.
    std::fputs(
        falcon::cli::help::FlagsHelp(absl::StrCat(kUsage, falcon::common::logging::kLoggingUsage),
                                     "agent/main.cc", /*dashes=*/false)
            .c_str(),
        stdout);
    return 0;
  }
  // --plaintext alone means true, as for the controller and falconctl (its flag holds a string so
  // that a config file's value stands unless the flag is given; Abseil takes a bare flag as
  // boolean only for bool flags, and would take the next argument as its value).
  std::vector<char*> args(argv, argv + argc);
  static char kPlaintextTrue[] = "--plaintext=true";
  static char kPlaintextFalse[] = "--plaintext=false";
  for (char*& a : args) {
    const std::string arg = a;
    if (arg == "--plaintext" || arg == "-plaintext") a = kPlaintextTrue;
    if (arg == "--noplaintext" || arg == "-noplaintext") a = kPlaintextFalse;
  }
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  falcon::common::logging::InitLogging(argv[0]);
  falcon::common::SetReleaseMutexMode();
  if (absl::Status s = falcon::common::CheckNoPositionals(positional); !s.ok()) {
    std::fprintf(stderr, "falcon-agent: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return Run();
}
