#include "controller/service/stream_limiter.h"

#include <glog/logging.h>

#include <optional>

#include "absl/strings/match.h"

namespace falcon::controller::service {

std::string PeerHost(const std::string& peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) return peer;
  const size_t colon = peer.rfind(':');
  // "ipv4:" itself ends at index 4: a colon there means no port.
  return colon == std::string::npos || colon <= 4 ? peer : peer.substr(0, colon);
}

absl::Status StreamLimiter::Admit(const std::string& peer, const std::string& what) {
  const std::string host = PeerHost(peer);
  std::optional<LimitRefusal> refusal;
  {
    absl::MutexLock lock(&mu_);
    size_t& n = open_[host];
    refusal = CheckStreamLimit(host, n, limits_);
    if (!refusal.has_value()) {
      ++n;
      return absl::OkStatus();
    }
    if (n == 0) open_.erase(host);
  }
  LOG(WARNING) << "stream refused rpc=" << what << " peer=" << peer << " limit=" << refusal->limit
               << " error=\"" << refusal->status.message() << "\"";
  if (metrics_ != nullptr) metrics_->LimitRefused(refusal->limit);
  return refusal->status;
}

void StreamLimiter::Release(const std::string& peer) {
  const std::string host = PeerHost(peer);
  absl::MutexLock lock(&mu_);
  auto it = open_.find(host);
  if (it == open_.end()) return;
  if (--it->second == 0) open_.erase(it);
}

size_t StreamLimiter::open(const std::string& peer) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(PeerHost(peer));
  return it == open_.end() ? 0 : it->second;
}

}  // namespace falcon::controller::service
