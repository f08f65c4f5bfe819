// A gRPC agent for loopback tests: one Telemetry.Connect stream, batches buffered until
// acknowledged and resent after a reconnect (as the real agent does), and a reader thread that
// answers directives and validation tasks at once with a Responder.
#ifndef FALCON_CONTROLLER_TESTING_LOOPBACK_AGENT_H_
#define FALCON_CONTROLLER_TESTING_LOOPBACK_AGENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/testing/sim_agent.h"
#include "proto/falcon/v1/telemetry.grpc.pb.h"

namespace falcon::controller::testing {

class LoopbackAgent {
 public:
  LoopbackAgent(std::string agent_id, std::string node, std::vector<uint32_t> ranks,
                std::vector<falcon::v1::JobRegistration> jobs);
  ~LoopbackAgent();

  // Opens a stream to `target`, says hello (first_unacked_sequence = the oldest buffered batch),
  // waits for ControllerHello, drops what it acknowledges and resends the rest in order.
  absl::Status Connect(const std::string& target, absl::Duration timeout);
  // Ends the stream from this side (WritesDone) and joins the reader.
  void Close();
  // Buffers `batch` under the next sequence and sends it. Returns the sequence.
  uint64_t Send(falcon::v1::TelemetryBatch batch);
  // Sends one raw message (for protocol tests; no buffering).
  bool SendRaw(const falcon::v1::AgentMessage& message);
  // Waits until every buffered batch is acknowledged. kDeadlineExceeded otherwise.
  absl::Status WaitAcked(absl::Duration timeout);
  // Waits until the reader thread has ended (the server finished the stream) and returns the
  // stream's final status.
  absl::StatusOr<grpc::Status> WaitClosed(absl::Duration timeout);

  void set_responder(Responder responder);
  // Credentials of the next Connect (default: insecure).
  void set_credentials(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    credentials_ = std::move(credentials);
  }
  bool profiling(const std::string& job) const;
  uint64_t hello_acked_sequence() const;
  // BatchAcks that carried a FieldError.
  std::vector<falcon::v1::BatchAck> rejected() const;
  const std::vector<uint32_t>& ranks() const { return ranks_; }

 private:
  void ReadLoop();
  void Handle(const falcon::v1::ControllerMessage& msg);
  bool Write(const falcon::v1::AgentMessage& msg);

  const std::string agent_id_;
  const std::string node_;
  const std::vector<uint32_t> ranks_;
  const std::vector<falcon::v1::JobRegistration> jobs_;

  std::shared_ptr<grpc::ChannelCredentials> credentials_ = grpc::InsecureChannelCredentials();
  std::unique_ptr<falcon::v1::Telemetry::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<falcon::v1::AgentMessage, falcon::v1::ControllerMessage>>
      stream_;
  std::thread reader_;

  mutable absl::Mutex mu_;
  absl::Mutex write_mu_;  // One writer at a time on the stream.
  Responder responder_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, falcon::v1::TelemetryBatch> unacked_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  bool hello_received_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t hello_acked_ ABSL_GUARDED_BY(mu_) = 0;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> profiling_ ABSL_GUARDED_BY(mu_);
  std::vector<falcon::v1::BatchAck> rejected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_LOOPBACK_AGENT_H_
