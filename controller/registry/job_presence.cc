#include "controller/registry/job_presence.h"

#include <algorithm>

namespace falcon::controller::registry {

const JobPresence::Record* JobPresence::Find(const std::string& job,
                                             const std::string& agent) const {
  auto jit = jobs_.find(job);
  if (jit == jobs_.end()) return nullptr;
  auto ait = jit->second.find(agent);
  return ait == jit->second.end() ? nullptr : &ait->second;
}

bool JobPresence::Away(const std::string& job, const std::string& agent, absl::Time now) {
  auto [it, inserted] = jobs_[job].try_emplace(agent);
  Record& r = it->second;
  if (!inserted && r.away) return false;
  r.since = now;
  r.away = true;
  return true;
}

std::optional<absl::Duration> JobPresence::Back(const std::string& job, const std::string& agent,
                                                absl::Time now) {
  auto jit = jobs_.find(job);
  if (jit == jobs_.end()) return std::nullopt;
  auto ait = jit->second.find(agent);
  if (ait == jit->second.end() || !ait->second.away) return std::nullopt;
  ait->second.away = false;  // Kept while rejoining (Prune).
  return now - ait->second.since;
}

bool JobPresence::IsAway(const std::string& job, const std::string& agent) const {
  const Record* r = Find(job, agent);
  return r != nullptr && r->away;
}

bool JobPresence::Rejoining(const std::string& job, const std::string& agent,
                            absl::Time now) const {
  const Record* r = Find(job, agent);
  return r != nullptr && now - r->since < grace_;
}

bool JobPresence::Held(const std::string& job, absl::Time now) const {
  auto jit = jobs_.find(job);
  if (jit == jobs_.end()) return false;
  for (const auto& [agent, r] : jit->second) {
    if (r.away && now - r.since < grace_) return true;
  }
  return false;
}

std::optional<absl::Time> JobPresence::UnreportedSince(
    const std::string& job, const std::vector<std::string>& agents) const {
  if (agents.empty()) return std::nullopt;
  absl::Time last = absl::InfinitePast();
  for (const std::string& a : agents) {
    const Record* r = Find(job, a);
    if (r == nullptr || !r->away) return std::nullopt;
    last = std::max(last, r->since);
  }
  return last;
}

std::vector<std::pair<std::string, absl::Time>> JobPresence::Expired(const std::string& job,
                                                                     absl::Time now) const {
  std::vector<std::pair<std::string, absl::Time>> out;
  auto jit = jobs_.find(job);
  if (jit == jobs_.end()) return out;
  for (const auto& [agent, r] : jit->second) {
    if (r.away && now - r.since >= grace_) out.emplace_back(agent, r.since);
  }
  return out;
}

std::vector<std::string> JobPresence::Jobs() const {
  std::vector<std::string> out;
  for (const auto& [job, agents] : jobs_) out.push_back(job);
  return out;
}

void JobPresence::Forget(const std::string& job, const std::string& agent) {
  auto jit = jobs_.find(job);
  if (jit == jobs_.end()) return;
  jit->second.erase(agent);
  if (jit->second.empty()) jobs_.erase(jit);
}

void JobPresence::Forget(const std::string& job) { jobs_.erase(job); }

void JobPresence::Prune(absl::Time now) {
  for (auto jit = jobs_.begin(); jit != jobs_.end();) {
    auto& agents = jit->second;
    for (auto ait = agents.begin(); ait != agents.end();) {
      if (!ait->second.away && now - ait->second.since >= grace_) {
        ait = agents.erase(ait);
      } else {
        ++ait;
      }
    }
    jit = agents.empty() ? jobs_.erase(jit) : std::next(jit);
  }
}

}  // namespace falcon::controller::registry
