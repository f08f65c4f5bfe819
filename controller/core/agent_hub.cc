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
  if (it == channels_.end() || !it->second.channel->Send(message)) {
    ++dropped_;
    return false;
  }
  return true;
}

}  // namespace falcon::controller::core
