// Deduplication of telemetry batches by (agent_id, sequence). The agent numbers its batches from 1
// and resends everything not acknowledged after a reconnect, so the controller must store each
// sequence once and say, in ControllerHello.acked_sequence, the highest contiguous sequence it has
// stored. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_INGEST_SEQUENCE_TRACKER_H_
#define FALCON_CONTROLLER_INGEST_SEQUENCE_TRACKER_H_

#include <cstdint>
#include <set>
#include <string>

#include "controller/store/records.pb.h"

namespace falcon::controller::ingest {

class SequenceTracker {
 public:
  // Sequences above the watermark remembered individually; beyond this many the oldest gap is
  // given up (the watermark jumps over it), bounding memory when an agent skips sequences.
  static constexpr size_t kMaxStoredAbove = 4096;

  SequenceTracker() = default;
  explicit SequenceTracker(const falcon::controller::v1::AgentRecord& record);

  // True when `sequence` was stored (or rejected) before: acknowledge it, do not apply it.
  bool IsDuplicate(uint64_t sequence) const;
  // Records `sequence` as stored (or rejected for good); advances the watermark over it.
  void MarkStored(uint64_t sequence);
  // The agent's AgentHello.first_unacked_sequence: it no longer holds anything below, so
  // sequences below are either stored or lost; the watermark moves up to first_unacked - 1.
  void ForgetBelow(uint64_t first_unacked_sequence);

  // Highest contiguous stored sequence (ControllerHello.acked_sequence).
  uint64_t acked_sequence() const { return acked_; }
  size_t stored_above_count() const { return above_.size(); }
  // Highest sequence stored (or rejected): what the agent has been seen to send.
  uint64_t highest_seen() const { return above_.empty() ? acked_ : *above_.rbegin(); }

  // Writes the dedup state into `record` (acked_sequence, stored_above).
  void ToRecord(falcon::controller::v1::AgentRecord* record) const;

 private:
  void Advance();

  uint64_t acked_ = 0;
  std::set<uint64_t> above_;
};

}  // namespace falcon::controller::ingest

#endif  // FALCON_CONTROLLER_INGEST_SEQUENCE_TRACKER_H_
