// Op records waiting for the agent: sealed, sequence-numbered batches kept until the agent has
// *delivered* them, so they are resent after a reconnect, also to a new agent that replaced one
// which died (ShimHello.first_unacked_sequence, ShimWelcome.acked_sequence, OpBatchAck.sequence,
// DeliveryAck.sequence in proto/falcon/v1/shim.proto; docs/architecture.md#shim--agent).
//
// Two watermarks: *accepted* (OpBatchAck, or ShimWelcome.acked_sequence on a connection) means
// the current agent holds the batch: it is not sent again on this connection. *Released*
// (DeliveryAck; with an older agent, the OpBatchAck itself) means the controller has what the
// agent made of it: the batch is forgotten. A reconnect rewinds to the new agent's
// acked_sequence, so everything held above it is sent again in sequence order.
//
// Bounded: at most `max_records` records in all (the open batch included). When a new record
// would exceed the bound the oldest sealed batch is dropped, so the newest records survive an
// absent agent. A dropped batch the agent had not accepted is reported in the next sealed batch's
// dropped_records (evicted_records); one it had accepted is not lost unless that agent dies
// before delivering it, and is counted apart (evicted_accepted_records). Sequences start at 1 and
// increase by 1 per sealed batch for the lifetime of the outbox (across reconnects). Not
// thread-safe: the owner (AgentLink) serializes calls.
#ifndef FALCON_TRAINER_SHIM_OUTBOX_H_
#define FALCON_TRAINER_SHIM_OUTBOX_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "trainer_shim/op_record.h"

namespace falcon::trainer_shim {

class Outbox {
 public:
  struct Options {
    uint32_t max_records = 262144;      // Bound on held records. REQUIRES >= max_batch_records.
    uint32_t max_batch_records = 4096;  // Records per batch, [1, 65536].
  };
  struct Batch {
    uint64_t sequence = 0;
    std::vector<OpRecord> records;
    uint64_t dropped_records = 0;  // Dropped (ring or outbox) since the previous sealed batch.
  };

  explicit Outbox(Options options) : options_(options) {}

  // Appends records to the open batch, sealing it whenever it reaches max_batch_records.
  void Add(const OpRecord* records, size_t n);
  // Counts records dropped before reaching the outbox (a full ring); reported like evictions.
  void AddDropped(uint64_t n) { pending_dropped_ += n; }
  // Seals the open batch if it has records or there are drops to report.
  void SealOpen();

  // The oldest sealed batch neither sent on the current connection nor accepted, or nullptr.
  const Batch* NextToSend() const;
  // Marks that batch as sent (REQUIRES: `sequence` is NextToSend()'s).
  void MarkSent(uint64_t sequence);
  // The agent holds every batch up to `sequence` (OpBatchAck): they are not sent again on this
  // connection, and are kept until released.
  void Accept(uint64_t sequence);
  // Every batch up to `sequence` is delivered: forget them. Returns records released.
  uint64_t Release(uint64_t sequence);
  // A new connection whose agent holds every batch up to `agent_acked_sequence`: everything above
  // it is unsent.
  void OnReconnect(uint64_t agent_acked_sequence);

  // Lowest sequence still held; 0 when none.
  uint64_t first_unacked_sequence() const { return sealed_.empty() ? 0 : sealed_.front().sequence; }
  uint64_t last_sequence() const { return next_sequence_ - 1; }
  uint64_t held_records() const { return held_records_; }
  size_t sealed_batches() const { return sealed_.size(); }
  bool empty() const { return sealed_.empty() && open_.records.empty(); }
  // True when the agent has accepted everything held (nothing is open, unsent or in flight).
  bool all_accepted() const {
    return open_.records.empty() && pending_dropped_ == 0 &&
           (sealed_.empty() || sealed_.back().sequence <= accepted_);
  }
  // Records dropped at the bound before an agent accepted them (reported as dropped_records).
  uint64_t evicted_records() const { return evicted_records_; }
  // Records dropped at the bound after an agent accepted them but before it delivered them: lost
  // only if that agent dies first (they can no longer be resent).
  uint64_t evicted_accepted_records() const { return evicted_accepted_records_; }

 private:
  void EvictForOne();

  const Options options_;
  std::deque<Batch> sealed_;  // Ascending sequence; the first `done_` were sent or accepted.
  size_t done_ = 0;
  uint64_t accepted_ = 0;  // Highest sequence the current agent holds.
  Batch open_;
  uint64_t next_sequence_ = 1;
  uint64_t held_records_ = 0;  // sealed + open.
  uint64_t pending_dropped_ = 0;
  uint64_t evicted_records_ = 0;
  uint64_t evicted_accepted_records_ = 0;
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_OUTBOX_H_
