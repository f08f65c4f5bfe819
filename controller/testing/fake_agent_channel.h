// An AgentChannel that records what the controller sends, for tests.
#ifndef FALCON_CONTROLLER_TESTING_FAKE_AGENT_CHANNEL_H_
#define FALCON_CONTROLLER_TESTING_FAKE_AGENT_CHANNEL_H_

#include <vector>

#include "controller/core/agent_hub.h"

namespace falcon::controller::testing {

class FakeAgentChannel : public core::AgentChannel {
 public:
  bool Send(const falcon::v1::ControllerMessage& message) override {
    if (closed) return false;
    sent.push_back(message);
    return true;
  }
  void Close(const absl::Status& status) override {
    closed = true;
    close_status = status;
  }
  // Messages of one kind, in order.
  std::vector<falcon::v1::ControllerMessage> Of(falcon::v1::ControllerMessage::MsgCase c) const {
    std::vector<falcon::v1::ControllerMessage> out;
    for (const auto& m : sent) {
      if (m.msg_case() == c) out.push_back(m);
    }
    return out;
  }
  std::vector<falcon::v1::ControllerMessage> sent;
  bool closed = false;
  absl::Status close_status;  // What Close ended the stream with.
};

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_FAKE_AGENT_CHANNEL_H_
