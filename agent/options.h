// Settings of the node agent, and the optional config file.
//
// Every setting has one key, used both as a flag name (--key=value) and in the config file.
// Precedence: defaults < config file < flags given on the command line.
// Config file (at most 1 MiB): either JSON (an object of key: value, values strings or numbers)
// or lines of `key = value` (blank lines and lines starting with # are ignored). Durations are
// written as Abseil durations ("1.5s", "500ms", "10m") or plain numbers of seconds; never
// infinite. Counts are decimal digits.
//
// Keys (default) [accepted range, checked by Validate]:
//   controller          controller address HOST:PORT, port in [1, 65535] (required)
//   tls_cert, tls_key   this node's PEM certificate (naming the node in its SAN or CN) and key,
//   tls_ca              and the cluster CA's certificate: mutual TLS to the controller
//                       (docs/operations.md#tls); required unless plaintext
//   plaintext           true: no TLS, for a local demo only (logged as a warning) (false)
//   socket              unix socket the shims attach to (/run/falcon/agent.sock) [1-100 bytes]
//   socket_group        group owning the socket (empty: the agent's group); mode is 0660
//   node                node name (the host name) [1 to 256 bytes of UTF-8]
//   agent_id            stable agent id (the node name) [1 to 256 bytes of UTF-8]
//   metrics_listen      HOST:PORT of /metrics; port 0 picks one; empty disables (0.0.0.0:9464)
//   summary_interval    how often summaries are flushed to the controller (1s) [1ms, 60s]
//   buffer_batches      telemetry batches held during a controller outage (4096) [1, 2^20]
//   buffer_bytes        bytes held during a controller outage (67108864) [1, 2^36]
//   backoff_initial     first reconnect delay (100ms) [1ms, 10m]; backoff_max: cap (30s)
//                       [backoff_initial, 1h]
//   backoff_jitter      relative jitter of reconnect delays (0.2) [0, 1); seed: its generator
//                       seed (1)
//   heartbeat_interval  heartbeat when the stream is otherwise idle (5s) [10ms, 10m]
//   drain_timeout       how long SIGTERM waits for the controller to ack buffered data (10s)
//                       [0, 10m]
//   hint_hold           how long a hinted iteration waits for late ops (5s) [0, 10m]
//   match_hold          how long an iteration waits for other ranks' matching ops (2s) [0, 10m]
//   job_idle_timeout    forget a job this long after its last shim left (10m) [1s, 7d]
//   max_raw_ops_per_rank  raw op records held per profiled rank between flushes (1048576)
//                       [1, 2^26]
#ifndef FALCON_AGENT_OPTIONS_H_
#define FALCON_AGENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/shim_hub.h"
#include "agent/telemetry_buffer.h"
#include "common/backoff.h"
#include "proto/grpc_tls.h"

namespace falcon::agent {

inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxBufferBatches = uint64_t{1} << 20;
inline constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 36;
inline constexpr uint64_t kMaxRawOpsPerRank = uint64_t{1} << 26;

struct AgentOptions {
  std::string controller;
  proto::TlsFiles tls;
  bool plaintext = false;
  std::string socket_path = "/run/falcon/agent.sock";
  std::string socket_group;
  std::string node;      // Filled with the host name by FillDefaults when empty.
  std::string agent_id;  // Filled with `node` by FillDefaults when empty.
  std::string metrics_listen = "0.0.0.0:9464";
  std::string version = "dev";
  absl::Duration summary_interval = absl::Seconds(1);
  absl::Duration heartbeat_interval = absl::Seconds(5);
  absl::Duration drain_timeout = absl::Seconds(10);
  TelemetryBuffer::Options buffer;
  common::Backoff::Options backoff;
  ShimHub::Options hub;  // hub.node is set from `node`.
};

// Every key ApplyValue accepts, in the order above.
const std::vector<std::string>& OptionKeys();

// Sets the setting `key` from its text form. kInvalidArgument naming the key when the key is
// unknown or the value does not parse.
absl::Status ApplyValue(absl::string_view key, absl::string_view value, AgentOptions* options);

// Applies a config file (JSON or key = value lines). kNotFound when it cannot be read;
// kInvalidArgument naming the file, line (or key, or JSON position) and what is wrong, also for a
// directory; kResourceExhausted for a file over kMaxConfigFileBytes.
absl::Status ApplyConfigFile(const std::string& path, AgentOptions* options);

// Fills node (host name), agent_id (node) and hub.node when empty.
void FillDefaults(AgentOptions* options);

// kInvalidArgument naming the first setting out of range (the ranges above).
absl::Status Validate(const AgentOptions& options);

}  // namespace falcon::agent

#endif  // FALCON_AGENT_OPTIONS_H_
