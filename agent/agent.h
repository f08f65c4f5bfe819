// The node agent (falcon-agent): serves the Shim API on a unix socket, reduces each rank's op
// stream to per-iteration summaries (ShimHub), buffers them (TelemetryBuffer) and streams them to
// the controller (ControllerLink), relays controller directives, validation tasks and profiling
// to the shims, and exports /metrics (prometheus-cpp Exposer).
//
// Lifecycle: Start -> (running: a flush thread moves summaries into the buffer every
// summary_interval) -> Drain (SIGTERM: stop taking shim data, flush everything, wait for the
// controller to ack it, up to drain_timeout, while the shims still hear what was delivered; then
// close the shim streams) -> destruction.
// Thread-safe.
#ifndef FALCON_AGENT_AGENT_H_
#define FALCON_AGENT_AGENT_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_metrics.h"
#include "agent/controller_link.h"
#include "agent/options.h"
#include "agent/shim_hub.h"
#include "agent/shim_service.h"
#include "agent/telemetry_buffer.h"
#include "common/clock.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace falcon::agent {

class Agent : private ControllerLink::Handler {
 public:
  // Validates `options` (kInvalidArgument naming the setting), binds the shim socket and the
  // metrics port (kUnavailable when either cannot be bound) and starts connecting to the
  // controller. `clock` must outlive the agent.
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options,
                                                      const common::Clock& clock);
  ~Agent() override;

  // Graceful stop: closes shim streams (shims keep unacked batches and reconnect to the next
  // agent), flushes every iteration held, and waits up to `timeout` until the controller has
  // acknowledged every buffered batch. kDeadlineExceeded when batches were still unacked.
  // Idempotent; the agent is stopped afterwards.
  absl::Status Drain(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // One flush cycle now (the flush thread does this every summary_interval).
  void FlushNow() ABSL_LOCKS_EXCLUDED(mu_);

  // "HOST:PORT" /metrics is served on; empty when disabled.
  const std::string& metrics_address() const { return metrics_address_; }
  const AgentOptions& options() const { return options_; }
  ShimHub& hub() { return *hub_; }
  TelemetryBuffer& buffer() { return *buffer_; }
  ControllerLink& link() { return *link_; }
  // Current flush interval (AgentConfig from the controller may change it).
  absl::Duration summary_interval() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Agent(AgentOptions options, const common::Clock& clock);

  // ControllerLink::Handler
  std::vector<v1::JobRegistration> Registrations() override;
  void OnControllerMessage(const v1::ControllerMessage& msg) override;

  void FlushLoop();
  void FlushOnce(bool drain);

  const AgentOptions options_;
  const common::Clock& clock_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<TelemetryBuffer> buffer_;
  std::unique_ptr<ControllerLink> link_;
  std::unique_ptr<ShimHub> hub_;
  std::unique_ptr<ShimServer> shim_server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string metrics_address_;

  absl::Mutex flush_mu_;  // Serializes flush cycles (thread, FlushNow, Drain).
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration summary_interval_ ABSL_GUARDED_BY(mu_);
  std::thread flush_thread_;
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_AGENT_H_
