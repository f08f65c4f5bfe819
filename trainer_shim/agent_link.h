// The shim's connection to the node agent: one background link thread that drains the op ring
// into an Outbox of sequenced batches and streams them over falcon.v1.Shim/Attach on the agent's
// unix socket, plus a reader thread per connection that dispatches what the agent sends.
//
// Lifecycle of a connection: new channel -> ShimHello (with first_unacked_sequence and the
// delivered_iteration learnt so far) -> wait for ShimWelcome (everything above its
// acked_sequence is resent; hints above its hinted_iteration too) -> resend all communicator
// registrations -> stream acks, results, hints and batches every flush_interval.
// A broken stream or a failed attempt is retried after an exponential backoff; while the agent is
// away the ring is still drained, so the Outbox keeps the newest records up to its bound.
//
// Delivery (an agent whose welcome says delivery_acks): batches the agent accepted (OpBatchAck)
// and hints it was sent stay here until its DeliveryAck says the controller has them, so an agent
// that dies (kill -9) loses nothing: its replacement gets them again (docs/architecture.md
// #shim--agent). Batches and hints dropped at the bounds are counted (Stats).
//
// Threads: Start/Stop from the owner; RegisterCommunicator/SendControl/SendHint from any thread;
// Listener methods are called on the reader thread and must not block for long.
#ifndef FALCON_TRAINER_SHIM_AGENT_LINK_H_
#define FALCON_TRAINER_SHIM_AGENT_LINK_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/backoff.h"
#include "proto/falcon/v1/shim.pb.h"
#include "trainer_shim/op_record.h"
#include "trainer_shim/outbox.h"
#include "trainer_shim/shim_options.h"
#include "trainer_shim/spsc_ring.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace falcon::trainer_shim {

class AgentLink {
 public:
  // Receives what the agent sends. Called on the reader thread.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void OnWelcome(const falcon::v1::ShimWelcome& welcome) = 0;
    virtual void OnDirective(const falcon::v1::Directive& directive) = 0;
    virtual void OnValidationTask(const falcon::v1::ValidationTask& task) = 0;
    virtual void OnProfiling(const falcon::v1::ProfilingControl& control) = 0;
    virtual void OnAgentError(const falcon::v1::FieldError& error) = 0;
  };

  struct Stats {
    bool connected = false;
    uint64_t connects = 0;         // Successful handshakes (ShimWelcome received).
    uint64_t disconnects = 0;      // Streams that broke after a handshake.
    uint64_t failed_attempts = 0;  // Attempts that never got a ShimWelcome.
    uint64_t batches_sent = 0;     // OpBatch writes, resends included.
    uint64_t batches_resent = 0;   // Writes of a sequence sent before.
    uint64_t records_acked = 0;    // Records released by agent acks (delivered).
    uint64_t records_evicted = 0;  // Dropped from the outbox at its bound before an agent had them.
    // Dropped at the bound after the agent accepted them, before it delivered them: lost only if
    // that agent dies first.
    uint64_t records_evicted_accepted = 0;
    // Iteration hints dropped at max_pending_hints (queued, or sent and held for a resend).
    uint64_t hints_dropped = 0;
    int64_t delivered_iteration = -1;  // Highest iteration the agent reported delivered.
    uint64_t held_records = 0;         // In the outbox now.
    uint64_t last_sequence = 0;        // Highest batch sequence sealed so far.
    uint64_t agent_errors = 0;         // FieldError messages from the agent.
  };

  // `ring` and `ring_dropped` (records the producer could not push) must outlive the link.
  // `make_hello` builds the ShimHello for each attempt (first_unacked_sequence is filled in here).
  AgentLink(const ShimOptions& options, SpscRing<OpRecord>* ring,
            const std::atomic<uint64_t>* ring_dropped, Listener* listener,
            std::function<falcon::v1::ShimHello()> make_hello);
  ~AgentLink();
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Starts the link thread (once).
  void Start();
  // Flushes to the agent for up to options.shutdown_flush_timeout (connecting if need be) until
  // the agent has accepted everything, then stops both threads. Idempotent. Records it has not
  // accepted by then are lost.
  // In a forked child (no link thread there) it only marks the link stopped.
  void Stop();

  // Sends the communicator now and again after every reconnect.
  void RegisterCommunicator(const falcon::v1::Communicator& communicator);
  // A directive ack or validation result: kept until written, never dropped.
  void SendControl(falcon::v1::ShimMessage message);
  // An iteration hint: kept until delivered (or, with an older agent, sent); the oldest are
  // dropped beyond options.max_pending_hints.
  void SendHint(const falcon::v1::IterationHint& hint);

  Stats stats() const;

 private:
  struct Connection;

  void Run();
  void DrainRing();
  bool Connect(Connection* c);
  void Session(Connection* c);
  void Teardown(Connection* c);
  void ReadLoop(Connection* c);
  // Writes everything pending; false when the stream broke.
  bool WritePending(Connection* c);
  bool FlushedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWelcomeLocked(const falcon::v1::ShimWelcome& welcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDeliveredLocked(const falcon::v1::DeliveryAck& delivered)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest hints (sent copies first) while more than max_pending_hints are held.
  void BoundHintsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(std::string_view message) const;

  const ShimOptions options_;
  const std::string target_;
  SpscRing<OpRecord>* const ring_;
  const std::atomic<uint64_t>* const ring_dropped_;
  Listener* const listener_;
  const std::function<falcon::v1::ShimHello()> make_hello_;

  std::vector<OpRecord> drain_buffer_;  // Link thread only.
  uint64_t ring_dropped_seen_ = 0;      // Link thread only.
  uint64_t max_sequence_sent_ = 0;      // Link thread only.

  mutable absl::Mutex mu_;
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::Communicator> comms_ ABSL_GUARDED_BY(mu_);
  size_t comms_sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<falcon::v1::ShimMessage> control_ ABSL_GUARDED_BY(mu_);
  std::deque<falcon::v1::ShimMessage> hints_ ABSL_GUARDED_BY(mu_);  // To send.
  // Sent to an agent with delivery acks, not yet delivered (ascending iterations).
  std::deque<falcon::v1::IterationHint> sent_hints_ ABSL_GUARDED_BY(mu_);
  bool delivery_acks_ ABSL_GUARDED_BY(mu_) = false;  // The current agent sends DeliveryAck.
  int64_t delivered_iteration_ ABSL_GUARDED_BY(mu_) = -1;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time stop_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool welcomed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  Stats stats_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
  bool started_ = false;  // Owner thread only.
  bool stopped_ = false;  // Owner thread only.
  int owner_pid_ = 0;     // Process that started the thread (a forked child has none).
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_AGENT_LINK_H_
