// A stand-in for the controller's Telemetry service on loopback, for agent tests (until the
// real controller is wired in, and afterwards for fault injection). It follows telemetry.proto:
// AgentHello first -> ControllerHello{acked_sequence}; TelemetryBatch -> store, then BatchAck;
// dedup by (agent_id, sequence). Its store outlives server restarts, like the controller's
// RocksDB, so a test can kill the server mid-stream and start it again on the same port.
// Thread-safe.
#ifndef FALCON_AGENT_TESTING_FAKE_CONTROLLER_H_
#define FALCON_AGENT_TESTING_FAKE_CONTROLLER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/telemetry.grpc.pb.h"

namespace falcon::agent::testing {

class FakeControllerStore {
 public:
  // Stores `batch` from `agent_id` unless that sequence is already stored; returns whether new.
  bool Store(const std::string& agent_id, const v1::TelemetryBatch& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Highest contiguous stored sequence of the agent, counting sequences below
  // `first_unacked` (from its hello) as settled: the agent no longer holds them.
  uint64_t Acked(const std::string& agent_id, uint64_t first_unacked) ABSL_LOCKS_EXCLUDED(mu_);

  void AddHello(const v1::AgentHello& hello) ABSL_LOCKS_EXCLUDED(mu_);
  void AddOther(const v1::AgentMessage& msg) ABSL_LOCKS_EXCLUDED(mu_);

  // Stored batches of an agent in sequence order.
  std::vector<v1::TelemetryBatch> Batches(const std::string& agent_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<v1::AgentHello> Hellos() const ABSL_LOCKS_EXCLUDED(mu_);
  // Validation results and directive acks received, in order.
  std::vector<v1::AgentMessage> Others() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t duplicates() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until `pred(*this)` holds or `timeout` passes; returns whether it held.
  bool WaitFor(const std::function<bool(const FakeControllerStore&)>& pred,
               absl::Duration timeout) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<uint64_t, v1::TelemetryBatch>> batches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> settled_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::AgentHello> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::AgentMessage> others_ ABSL_GUARDED_BY(mu_);
  uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
};

class FakeController {
 public:
  // `store` must outlive the controller.
  explicit FakeController(FakeControllerStore* store);
  ~FakeController();

  // Serves on 127.0.0.1:`port` (0 picks a free port; then port() says which). kUnavailable when
  // the port cannot be bound.
  absl::Status Start(int port = 0);
  // Abrupt stop, like a crash: streams are cancelled at once.
  void Kill();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // While false, batches are stored but not acknowledged (a crash between store and ack).
  void set_ack(bool ack) ABSL_LOCKS_EXCLUDED(mu_);
  // While false, batches are neither stored nor acknowledged (lost in a crash).
  void set_store(bool store) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `msg` on the live agent stream; false when none.
  bool Send(const v1::ControllerMessage& msg) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until an agent stream is live or `timeout` passes.
  bool WaitForAgent(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Service;
  FakeControllerStore* const store_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex mu_;
  bool ack_ ABSL_GUARDED_BY(mu_) = true;
  bool store_batches_ ABSL_GUARDED_BY(mu_) = true;
  grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream_ ABSL_GUARDED_BY(mu_) =
      nullptr;
  absl::Mutex write_mu_;  // One writer at a time on stream_.
};

}  // namespace falcon::agent::testing

#endif  // FALCON_AGENT_TESTING_FAKE_CONTROLLER_H_
