// Compact form of one op record while the agent holds it until its iteration completes, and the
// key that matches the same op instance across the ranks taking part in it.
#ifndef FALCON_AGENT_REDUCE_HELD_OP_H_
#define FALCON_AGENT_REDUCE_HELD_OP_H_

#include <cstdint>
#include <limits>
#include <utility>

#include "proto/falcon/v1/common.pb.h"

namespace falcon::agent::reduce {

// Identifies one op instance across its participants: for a collective the n-th collective on
// the communicator (every member calls collectives on a communicator in the same order); for a
// point-to-point op the n-th transfer from `src` to `dst` on the communicator (the n-th SEND at
// src pairs with the n-th RECV at dst).
struct InstanceKey {
  static constexpr uint32_t kCollective = std::numeric_limits<uint32_t>::max();
  uint64_t comm_id = 0;
  uint32_t src = kCollective;  // Sending rank for p2p; kCollective for collectives.
  uint32_t dst = kCollective;  // Receiving rank for p2p; kCollective for collectives.
  uint64_t index = 0;          // 0-based occurrence number.

  friend bool operator==(const InstanceKey& a, const InstanceKey& b) {
    return a.comm_id == b.comm_id && a.src == b.src && a.dst == b.dst && a.index == b.index;
  }
  template <typename H>
  friend H AbslHashValue(H h, const InstanceKey& k) {
    return H::combine(std::move(h), k.comm_id, k.src, k.dst, k.index);
  }
};

struct HeldOp {
  uint64_t comm_id = 0;
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t device_ns = 0;   // Device time when profiled; 0 otherwise.
  int64_t iteration = -1;  // From the shim when hinted; -1 unknown.
  InstanceKey key;
  bool matched = false;  // `key` is tracked in the job's InstanceTable.
  v1::OpKind kind = v1::OP_KIND_UNSPECIFIED;
  int64_t duration_ns() const { return end_ns - start_ns; }
};

}  // namespace falcon::agent::reduce

#endif  // FALCON_AGENT_REDUCE_HELD_OP_H_
