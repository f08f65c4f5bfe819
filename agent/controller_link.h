// The agent's one bidirectional stream to the controller (telemetry.proto Telemetry.Connect),
// kept up for the agent's lifetime: reconnects with exponential backoff and jitter.
//
// On each connection: AgentHello{agent_id, node, jobs, first_unacked_sequence, version} first;
// the controller's ControllerHello{acked_sequence} drops what it already holds from the buffer,
// then every unacknowledged batch is resent in order (TelemetryBuffer) followed by new ones.
// BatchAck{sequence} removes batches (a rejected batch is removed too: it is not resent).
// Other controller messages go to the Handler from the link's reader thread. Validation results
// and directive acks (Send) wait in a bounded outbox while disconnected. Heartbeats keep an idle
// stream observable.
//
// Threads: one connection thread (writes) and, per connection, one reader thread.
// Thread-safe.
#ifndef FALCON_AGENT_CONTROLLER_LINK_H_
#define FALCON_AGENT_CONTROLLER_LINK_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/shim_hub.h"
#include "agent/telemetry_buffer.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "proto/falcon/v1/telemetry.grpc.pb.h"
#include "proto/grpc_tls.h"

namespace falcon::agent {

class ControllerLink : public ControllerSink {
 public:
  struct Options {
    std::string address;  // host:port of the controller.
    proto::TlsFiles tls;  // Mutual TLS (read at each connection attempt); empty: plaintext.
    std::string agent_id;
    std::string node;
    std::string version;
    common::Backoff::Options backoff;
    absl::Duration heartbeat_interval = absl::Seconds(5);
    absl::Duration hello_timeout = absl::Seconds(10);  // Wait for ControllerHello.
    size_t max_outbox = 4096;                          // Results/acks held while disconnected.
    int max_batches_per_round = 16;  // Batches written before the outbox is checked again.
  };

  class Handler {
   public:
    virtual ~Handler() = default;
    // Jobs for AgentHello.
    virtual std::vector<v1::JobRegistration> Registrations() = 0;
    // Directives, validation tasks, profiling control and config (reader thread).
    virtual void OnControllerMessage(const v1::ControllerMessage& msg) = 0;
  };

  struct Stats {
    uint64_t connects = 0;          // Streams that got a ControllerHello.
    uint64_t attempts = 0;          // Connection attempts.
    uint64_t outbox_dropped = 0;    // Results/acks dropped: outbox full.
    uint64_t rejected_batches = 0;  // BatchAcks carrying an error.
  };

  // `buffer`, `handler` and `metrics` must outlive the link.
  ControllerLink(Options options, TelemetryBuffer* buffer, Handler* handler, AgentMetrics* metrics,
                 const common::Clock& clock);
  ~ControllerLink() override;

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the stream and joins the threads. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // New batches were pushed into the buffer.
  void Notify() ABSL_LOCKS_EXCLUDED(mu_);
  // ControllerSink: queues a validation result or directive ack.
  void Send(v1::AgentMessage msg) override ABSL_LOCKS_EXCLUDED(mu_);

  bool connected() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until connected or `timeout` passes; returns connected().
  bool WaitConnected(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();
  // One connection: hello, then the stream until it breaks or Stop. True when the hello was
  // answered; `*ended` says how the stream ended (its gRPC status).
  bool RunConnection(std::string* ended);
  void ReadLoop(grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>* stream,
                uint64_t generation);

  const Options options_;
  TelemetryBuffer* const buffer_;
  Handler* const handler_;
  AgentMetrics* const metrics_;
  const common::Clock& clock_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;  // Current stream's context.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;             // Current connection number.
  bool hello_received_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;  // The controller ended the current stream.
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::AgentMessage> outbox_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_CONTROLLER_LINK_H_
