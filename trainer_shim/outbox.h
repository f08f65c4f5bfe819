// Op records waiting for the agent: sealed, sequence-numbered batches kept until the agent acks
// them, so they are resent after a reconnect (ShimHello.first_unacked_sequence,
// ShimWelcome.acked_sequence, OpBatchAck.sequence in proto/falcon/v1/shim.proto).
//
// Bounded: at most `max_records` records in all (the open batch included). When a new record
// would exceed the bound the oldest sealed batch is dropped, sent or not, so the newest records
// survive an absent agent; the dropped count is reported in the next sealed batch's
// dropped_records. Sequences start at 1 and increase by 1 per sealed batch for the lifetime of the
// outbox (across reconnects). Not thread-safe: the owner (AgentLink) serializes calls.
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

  // The oldest sealed batch not yet sent on the current connection, or nullptr.
  const Batch* NextToSend() const;
  // Marks that batch as sent (REQUIRES: `sequence` is NextToSend()'s).
  void MarkSent(uint64_t sequence);
  // The agent holds every batch up to `sequence`: forget them. Returns records released.
  uint64_t Ack(uint64_t sequence);
  // A new connection: forget batches up to `agent_acked_sequence`; everything else is unsent.
  void OnReconnect(uint64_t agent_acked_sequence);

  // Lowest sequence still held; 0 when none.
  uint64_t first_unacked_sequence() const { return sealed_.empty() ? 0 : sealed_.front().sequence; }
  uint64_t last_sequence() const { return next_sequence_ - 1; }
  uint64_t held_records() const { return held_records_; }
  size_t sealed_batches() const { return sealed_.size(); }
  bool empty() const { return sealed_.empty() && open_.records.empty(); }
  // Records dropped from the outbox so far (oldest batches evicted at the bound).
  uint64_t evicted_records() const { return evicted_records_; }

 private:
  void EvictForOne();

  const Options options_;
  std::deque<Batch> sealed_;  // Ascending sequence; the first `sent_` were sent on this connection.
  size_t sent_ = 0;
  Batch open_;
  uint64_t next_sequence_ = 1;
  uint64_t held_records_ = 0;  // sealed + open.
  uint64_t pending_dropped_ = 0;
  uint64_t evicted_records_ = 0;
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_OUTBOX_H_
