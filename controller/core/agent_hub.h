// The connected agents and the way to reach them: one AgentChannel per live telemetry stream.
// Messages to an agent that is not connected are dropped (and counted); state that must reach it
// is resent when it reconnects (profiling state, pending directives). While held (Hold), messages
// wait in order and go out on Release: the controller holds them until the state they announce
// (a BatchAck, a ControllerHello's acked_sequence, a directive) is durable. Not thread-safe:
// controller loop only; AgentChannel::Send itself must be safe to call from the loop.
#ifndef FALCON_CONTROLLER_CORE_AGENT_HUB_H_
#define FALCON_CONTROLLER_CORE_AGENT_HUB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::controller::core {

// One agent's outbound stream. Implemented by the gRPC reactor (service/) and by fakes in tests.
class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Queues `message` for the agent; never blocks. Returns false when the stream is gone.
  virtual bool Send(const falcon::v1::ControllerMessage& message) = 0;
  // Ends the stream with `status` (an error) once the queued messages are written; later Sends
  // return false. Never blocks.
  virtual void Close(const absl::Status& status) = 0;
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

  // Sends to one agent; false when it is not connected or its stream is gone (while held: when
  // it is not connected).
  bool Send(const std::string& agent_id, const falcon::v1::ControllerMessage& message);
  // Sends on `channel` (the stream a message came in on), in order with Send.
  bool SendTo(const std::shared_ptr<AgentChannel>& channel,
              const falcon::v1::ControllerMessage& message);
  // Queue messages from now on.
  void Hold() { held_ = true; }
  // Sends the queued messages in order and stops queueing.
  void Release();
  bool held() const { return held_; }
  size_t held_messages() const { return queued_.size(); }
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
  bool held_ = false;
  std::vector<std::pair<std::shared_ptr<AgentChannel>, falcon::v1::ControllerMessage>> queued_;
};

}  // namespace falcon::controller::core

#endif  // FALCON_CONTROLLER_CORE_AGENT_HUB_H_
