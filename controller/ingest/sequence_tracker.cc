#include "controller/ingest/sequence_tracker.h"

namespace falcon::controller::ingest {

SequenceTracker::SequenceTracker(const falcon::controller::v1::AgentRecord& record)
    : acked_(record.acked_sequence()) {
  for (uint64_t s : record.stored_above()) {
    if (s > acked_) above_.insert(s);
  }
  Advance();
}

bool SequenceTracker::IsDuplicate(uint64_t sequence) const {
  return sequence <= acked_ || above_.count(sequence) > 0;
}

void SequenceTracker::MarkStored(uint64_t sequence) {
  if (sequence <= acked_) return;
  above_.insert(sequence);
  Advance();
  while (above_.size() > kMaxStoredAbove) {
    acked_ = *above_.begin();
    above_.erase(above_.begin());
    Advance();
  }
}

void SequenceTracker::ForgetBelow(uint64_t first_unacked_sequence) {
  if (first_unacked_sequence == 0 || first_unacked_sequence - 1 <= acked_) return;
  acked_ = first_unacked_sequence - 1;
  while (!above_.empty() && *above_.begin() <= acked_) above_.erase(above_.begin());
  Advance();
}

void SequenceTracker::Advance() {
  while (!above_.empty() && *above_.begin() == acked_ + 1) {
    ++acked_;
    above_.erase(above_.begin());
  }
}

void SequenceTracker::ToRecord(falcon::controller::v1::AgentRecord* record) const {
  record->set_acked_sequence(acked_);
  record->clear_stored_above();
  for (uint64_t s : above_) record->add_stored_above(s);
}

}  // namespace falcon::controller::ingest
