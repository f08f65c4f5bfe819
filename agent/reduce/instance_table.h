// Start times of op instances across the ranks of one job on this node, for the wait/transfer
// split of CommIterationSummary: when every participant of an op instance is on this node, the
// time a rank spends before the last participant arrives is waiting, the rest is transfer:
//   wait_r = clamp(max_p start_p - start_r, 0, duration_r).
// (common.proto: "estimated from the spread of start times across members".)
//
// Entries are created when the first participant reports, complete when all `expected` have
// reported, and erased when all have consumed them or when older than the TTL (a participant
// that never reports). Not thread-safe.
#ifndef FALCON_AGENT_REDUCE_INSTANCE_TABLE_H_
#define FALCON_AGENT_REDUCE_INSTANCE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "agent/reduce/held_op.h"

namespace falcon::agent::reduce {

class InstanceTable {
 public:
  // `ttl_ns`: entries older than this (by the times passed to Report) are dropped by Expire.
  explicit InstanceTable(int64_t ttl_ns) : ttl_ns_(ttl_ns) {}

  // A participant reports its start of instance `key`, which has `expected` participants (>= 1).
  // `now_ns` is the agent's monotonic time.
  void Report(const InstanceKey& key, int expected, int64_t start_ns, int64_t now_ns);

  // The latest start over all participants once every one has reported; nullopt before.
  std::optional<int64_t> LatestStart(const InstanceKey& key) const;

  // A participant is done with `key`; the entry goes once all have consumed it.
  void Consume(const InstanceKey& key);

  // Drops entries created before now_ns - ttl.
  void Expire(int64_t now_ns);

  size_t size() const { return entries_.size(); }
  uint64_t expired() const { return expired_; }

 private:
  struct Entry {
    int64_t max_start_ns = 0;
    int64_t created_ns = 0;
    int expected = 0;
    int reported = 0;
    int consumed = 0;
  };
  const int64_t ttl_ns_;
  absl::flat_hash_map<InstanceKey, Entry> entries_;
  std::deque<std::pair<int64_t, InstanceKey>> by_age_;  // (created_ns, key), oldest first.
  uint64_t expired_ = 0;
};

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_INSTANCE_TABLE_H_
