#include "agent/reduce/instance_table.h"

#include <algorithm>

namespace falcon::agent::reduce {

void InstanceTable::Report(const InstanceKey& key, int expected, int64_t start_ns, int64_t now_ns) {
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& e = it->second;
  if (inserted) {
    e.max_start_ns = start_ns;
    e.created_ns = now_ns;
    e.expected = std::max(expected, 1);
    by_age_.emplace_back(now_ns, key);
  } else {
    e.max_start_ns = std::max(e.max_start_ns, start_ns);
  }
  e.reported++;
}

std::optional<int64_t> InstanceTable::LatestStart(const InstanceKey& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.reported < it->second.expected) return std::nullopt;
  return it->second.max_start_ns;
}

void InstanceTable::Consume(const InstanceKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (++it->second.consumed >= it->second.expected) entries_.erase(it);
}

void InstanceTable::Expire(int64_t now_ns) {
  while (!by_age_.empty()) {
    const auto& [created_ns, key] = by_age_.front();
    auto it = entries_.find(key);
    // A consumed key leaves its age record behind; a key re-created later has a newer time.
    const bool live = it != entries_.end() && it->second.created_ns == created_ns;
    if (live) {
      if (created_ns >= now_ns - ttl_ns_) break;
      entries_.erase(it);
      expired_++;
    }
    by_age_.pop_front();
  }
}

}  // namespace falcon::agent::reduce
