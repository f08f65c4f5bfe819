#include "controller/core/agent_hub.h"

#include <algorithm>

namespace falcon::controller::core {

uint64_t AgentHub::Attach(const std::string& agent_id, std::shared_ptr<AgentChannel> channel) {
  Entry& e = channels_[agent_id];
  e.session = next_session_++;
  e.channel = std::move(channel);
  return e.session;
}

bool AgentHub::Detach(const std::string& agent_id, uint64_t session) {
  auto it = channels_.find(agent_id);
  if (it == channels_.end() || it->second.session != session) return false;
  channels_.erase(it);
  return true;
}

bool AgentHub::IsConnected(const std::string& agent_id) const {
  return channels_.find(agent_id) != channels_.end();
}

std::vector<std::string> AgentHub::ConnectedAgents() const {
  std::vector<std::string> ids;
  for (const auto& [id, e] : channels_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool AgentHub::Send(const std::string& agent_id, const falcon::v1::ControllerMessage& message) {
  auto it = channels_.find(agent_id);
  if (it == channels_.end()) {
    ++dropped_;
    return false;
  }
  return SendTo(it->second.channel, message);
}

bool AgentHub::SendTo(const std::shared_ptr<AgentChannel>& channel,
                      const falcon::v1::ControllerMessage& message) {
  if (channel == nullptr) return false;
  if (held_) {
    queued_.emplace_back(channel, message);
    return true;
  }
  if (!channel->Send(message)) {
    ++dropped_;
    return false;
  }
  return true;
}

void AgentHub::Release() {
  held_ = false;
  std::vector<std::pair<std::shared_ptr<AgentChannel>, falcon::v1::ControllerMessage>> queued;
  queued.swap(queued_);
  for (const auto& [channel, message] : queued) {
    if (!channel->Send(message)) ++dropped_;
  }
}

}  // namespace falcon::controller::core
