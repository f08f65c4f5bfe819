// FakeAgent: a test double of the node agent's side of falcon.v1.Shim/Attach, serving one unix
// socket. It records everything shims send, acks op batches (switchable), answers ShimHello with a
// ShimWelcome, and lets the test push directives, validation tasks, profiling control and
// delivery acks to the attached stream. Stop() drops every stream at once, like a killed agent; a
// new FakeAgent on the same path is a restarted one (it knows nothing of the old one's batches).
// Thread-safe.
#ifndef FALCON_TRAINER_SHIM_FAKE_AGENT_H_
#define FALCON_TRAINER_SHIM_FAKE_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/shim.grpc.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace falcon::trainer_shim {

// A unix socket path for a test: $TEST_TMPDIR/<name> when it fits in sun_path, else a fresh
// mkdtemp directory under /tmp (Bazel's TEST_TMPDIR is often longer than the 107-byte limit).
std::string TestSocketPath(const std::string& name);

class FakeAgent {
 public:
  struct Options {
    bool ack_batches = true;              // Answer each OpBatch with an OpBatchAck.
    bool profiling = false;               // ShimWelcome.profiling.
    uint64_t welcome_acked_sequence = 0;  // ShimWelcome.acked_sequence (a fresh agent holds none).
    // ShimWelcome.delivery_acks: the shim then holds accepted batches and sent hints until a
    // DeliveryAck (sent by the test with SendDelivered) releases them.
    bool delivery_acks = false;
    // ShimWelcome.hinted_iteration (-1: unset, a fresh agent holds no hint).
    int64_t welcome_hinted_iteration = -1;
  };

  // kUnavailable when the socket cannot be bound.
  static absl::StatusOr<std::unique_ptr<FakeAgent>> Start(const std::string& socket_path,
                                                          Options options);
  static absl::StatusOr<std::unique_ptr<FakeAgent>> Start(const std::string& socket_path) {
    return Start(socket_path, Options());
  }
  ~FakeAgent();

  // Kills every stream and closes the socket. Idempotent.
  void Stop();

  // Writes to the attached shim stream (the latest). False when none is attached.
  bool Send(const falcon::v1::AgentToShim& message);
  bool SendDirective(const falcon::v1::Directive& directive);
  // DeliveryAck{sequence, iteration}.
  bool SendDelivered(uint64_t sequence, int64_t iteration);
  void set_ack_batches(bool ack);

  // Waits (real time, up to `timeout`) until `predicate` holds; checks it whenever a message
  // arrives. True if it held.
  bool WaitFor(const std::function<bool()>& predicate, absl::Duration timeout = absl::Seconds(20));

  // Observations, in arrival order.
  std::vector<falcon::v1::ShimHello> hellos() const;
  std::vector<falcon::v1::OpBatch> batches() const;
  std::vector<falcon::v1::OpRecord> records() const;        // All records of all batches received.
  std::vector<falcon::v1::OpRecord> acked_records() const;  // Records of batches it acked.
  std::vector<falcon::v1::Communicator> communicators() const;
  std::vector<falcon::v1::DirectiveAck> acks() const;
  std::vector<falcon::v1::ValidationResult> results() const;
  std::vector<falcon::v1::IterationHint> hints() const;
  bool attached() const;

 private:
  class Service;
  explicit FakeAgent(Options options);
  void OnMessage(
      const falcon::v1::ShimMessage& message,
      grpc::ServerReaderWriter<falcon::v1::AgentToShim, falcon::v1::ShimMessage>* stream);

  mutable absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::ShimHello> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::OpBatch> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::OpRecord> acked_records_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::Communicator> communicators_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::DirectiveAck> acks_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::ValidationResult> results_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::IterationHint> hints_ ABSL_GUARDED_BY(mu_);
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;

  // Serializes writes to the attached stream (the handler thread and test threads both write).
  mutable absl::Mutex write_mu_;
  grpc::ServerReaderWriter<falcon::v1::AgentToShim, falcon::v1::ShimMessage>* stream_
      ABSL_GUARDED_BY(write_mu_) = nullptr;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  bool stopped_ = false;
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_FAKE_AGENT_H_
