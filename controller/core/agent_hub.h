// The connected agents and the way to reach them: one AgentChannel per live telemetry stream.
// Messages to an agent that is not connected are dropped (and counted); state that must reach it
// is resent when it reconnects (profiling state, pending directives). Not thread-safe: controller
// loop only; AgentChannel::Send itself must be safe to call from the loop.
#ifndef FALCON_CONTROLLER_CORE_AGENT_HUB_H_
#define FALCON_CONTROLLER_CORE_AGENT_HUB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::core {

// One agent's outbound stream. Implemented by the gRPC reactor (service/) and by fakes in tests.
class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Queues `message` for the agent; never blocks. Returns false when the stream is gone.
  virtual bool Send(const falcon::v1::ControllerMessage& message) = 0;
};

class AgentHub {
 public:
  // Makes `channel` the agent's stream (replacing an older one: a reconnect). Returns a session
  // number that identifies this connection for Detach.
  uint64_t Attach(const std::string& agent_id, std::shared_ptr<AgentChannel> channel);
  // Forgets the agent's stream if `session` is still its current one. True when detached.
  bool Detach(const std::string& agent_id, uint64_t session);

  bool IsConnected(const std::string& agent_id) const;
  size_t connected() const { return channels_.size(); }
  std::vector<std::string> ConnectedAgents() const;  // Sorted.

  // Sends to one agent; false when it is not connected or its stream is gone.
  bool Send(const std::string& agent_id, const falcon::v1::ControllerMessage& message);
  // Messages not delivered because the agent was not connected.
  uint64_t dropped() const { return dropped_; }

 private:
  struct Entry {
    uint64_t session = 0;
    std::shared_ptr<AgentChannel> channel;
  };
  absl::flat_hash_map<std::string, Entry> channels_;
  uint64_t next_session_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_AGENT_HUB_H_
