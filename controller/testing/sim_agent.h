// An in-process agent for Controller tests and benchmarks: speaks telemetry.proto to a
// Controller directly (no gRPC), records what the controller sends, and answers directives and
// validation tasks the way a healthy agent with cooperative shims would.
#ifndef FALCON_CONTROLLER_TESTING_SIM_AGENT_H_
#define FALCON_CONTROLLER_TESTING_SIM_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/controller.h"
#include "controller/testing/fake_agent_channel.h"

namespace falcon::controller::testing {

struct Responder {
  // Mean GEMM time a rank reports (ns); default 1 ms.
  std::function<int64_t(uint32_t rank)> gemm_ns = [](uint32_t) { return 1'000'000; };
  // Time a link takes (ns); default 2 ms.
  std::function<int64_t(uint32_t src, uint32_t dst)> link_ns = [](uint32_t, uint32_t) {
    return 2'000'000;
  };
  bool ack_directives = true;
  bool answer_tasks = true;
  // A rank's reason to reject a directive ("" or unset: APPLIED), e.g. a late pause.
  std::function<std::string(const falcon::v1::Directive&, uint32_t rank)> reject;
};

class SimAgent {
 public:
  SimAgent(std::string agent_id, std::string node, std::vector<uint32_t> ranks);

  // Opens a stream (a new session; the previous one, if live, ends first: an agent id is live on
  // one stream at a time) and sends AgentHello.
  absl::Status Connect(Controller& c, const std::vector<falcon::v1::JobRegistration>& jobs,
                       uint64_t first_unacked_sequence = 0);
  // The stream ends (as when the process or the network goes away).
  void Disconnect(Controller& c);
  // Sends `batch` with the next sequence (or its own when non-zero); returns the BatchAck the
  // controller answered with. Errors: the stream error, or kInternal when no ack came.
  absl::StatusOr<falcon::v1::BatchAck> Send(Controller& c, falcon::v1::TelemetryBatch batch);
  // Answers every directive (APPLIED per own target rank) and validation task (per own rank)
  // received since the last call. Returns how many messages it answered.
  int Respond(Controller& c, const Responder& responder = Responder());

  // Whether the controller asked to profile `job` (latest ProfilingControl).
  bool profiling(const std::string& job) const { return profiling_.count(job) > 0; }
  const std::vector<uint32_t>& ranks() const { return ranks_; }
  uint64_t last_sequence() const { return next_sequence_ - 1; }
  void set_next_sequence(uint64_t s) { next_sequence_ = s; }
  const falcon::v1::ControllerHello& hello() const { return hello_; }
  // Everything received on the current stream.
  FakeAgentChannel& channel() { return *channel_; }
  const std::string& agent_id() const { return session_.agent_id; }

 private:
  std::string agent_id_;
  std::string node_;
  std::vector<uint32_t> ranks_;
  std::shared_ptr<FakeAgentChannel> channel_;
  AgentSession session_;
  size_t handled_ = 0;
  uint64_t next_sequence_ = 1;
  std::set<std::string> profiling_;
  falcon::v1::ControllerHello hello_;
};

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_SIM_AGENT_H_
