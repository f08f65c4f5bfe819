// A raw client of the agent's Shim service for tests: sends any ShimMessage (also malformed
// ones, which the real trainer_shim never sends) and collects what the agent answers.
// Thread-safe.
#ifndef FALCON_AGENT_TESTING_SHIM_TEST_CLIENT_H_
#define FALCON_AGENT_TESTING_SHIM_TEST_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/shim.grpc.pb.h"

namespace falcon::agent::testing {

class ShimTestClient {
 public:
  // Opens an Attach stream on the agent's unix socket.
  explicit ShimTestClient(const std::string& socket_path);
  ~ShimTestClient();

  bool Send(const v1::ShimMessage& msg);
  // The next message of kind `kind` (earlier messages of other kinds are kept for later calls),
  // or nullopt after `timeout`.
  std::optional<v1::AgentToShim> Next(v1::AgentToShim::MsgCase kind,
                                      absl::Duration timeout = absl::Seconds(20));
  // Half-closes and waits for the stream's end; returns its status.
  grpc::Status Close();
  // True once the agent ended the stream.
  bool Ended() const;

 private:
  void ReadLoop();

  std::unique_ptr<v1::Shim::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ShimMessage, v1::AgentToShim>> stream_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::deque<v1::AgentToShim> received_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ = false;
  grpc::Status status_;
};

}  // namespace falcon::agent::testing

#endif  // FALCON_AGENT_TESTING_SHIM_TEST_CLIENT_H_
