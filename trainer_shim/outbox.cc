#include "trainer_shim/outbox.h"

#include <algorithm>

namespace falcon::trainer_shim {

void Outbox::EvictForOne() {
  while (held_records_ + 1 > options_.max_records && !sealed_.empty()) {
    Batch& oldest = sealed_.front();
    const uint64_t n = oldest.records.size();
    held_records_ -= n;
    if (oldest.sequence <= accepted_) {
      // The agent has it (and its drop count): only the copy for a resend goes.
      evicted_accepted_records_ += n;
    } else {
      evicted_records_ += n;
      // Keep the drop information the evicted batch carried, plus the evicted records themselves.
      pending_dropped_ += n + oldest.dropped_records;
    }
    sealed_.pop_front();
    if (done_ > 0) --done_;
  }
}

void Outbox::Add(const OpRecord* records, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    EvictForOne();
    if (open_.records.capacity() == 0) {
      open_.records.reserve(std::min<uint32_t>(options_.max_batch_records, 1024));
    }
    open_.records.push_back(records[i]);
    ++held_records_;
    if (open_.records.size() >= options_.max_batch_records) SealOpen();
  }
}

void Outbox::SealOpen() {
  if (open_.records.empty() && pending_dropped_ == 0) return;
  open_.sequence = next_sequence_++;
  open_.dropped_records = pending_dropped_;
  pending_dropped_ = 0;
  sealed_.push_back(std::move(open_));
  open_ = Batch();
}

const Outbox::Batch* Outbox::NextToSend() const {
  return done_ < sealed_.size() ? &sealed_[done_] : nullptr;
}

void Outbox::MarkSent(uint64_t sequence) {
  if (done_ < sealed_.size() && sealed_[done_].sequence == sequence) ++done_;
}

void Outbox::Accept(uint64_t sequence) {
  accepted_ = std::max(accepted_, sequence);
  while (done_ < sealed_.size() && sealed_[done_].sequence <= accepted_) ++done_;
}

uint64_t Outbox::Release(uint64_t sequence) {
  uint64_t released = 0;
  while (!sealed_.empty() && sealed_.front().sequence <= sequence) {
    released += sealed_.front().records.size();
    held_records_ -= sealed_.front().records.size();
    sealed_.pop_front();
    if (done_ > 0) --done_;
  }
  return released;
}

void Outbox::OnReconnect(uint64_t agent_acked_sequence) {
  accepted_ = 0;
  done_ = 0;
  Accept(agent_acked_sequence);
}

}  // namespace falcon::trainer_shim
