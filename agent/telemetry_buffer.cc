#include "agent/telemetry_buffer.h"

#include <utility>
#include <vector>

#include "common/telemetry_batch.h"

namespace falcon::agent {

absl::Status TelemetryBuffer::Validate(const Options& options) {
  if (options.max_batches == 0) {
    return absl::InvalidArgumentError("buffer_batches: must be > 0");
  }
  if (options.max_bytes == 0) {
    return absl::InvalidArgumentError("buffer_bytes: must be > 0");
  }
  return absl::OkStatus();
}

TelemetryBuffer::TelemetryBuffer(Options options) : options_(options) {}

void TelemetryBuffer::Settle(const std::vector<uint64_t>& settled) {
  if (settled.empty()) return;
  if (on_settled_) on_settled_(settled);
  absl::MutexLock lock(&mu_);
  settling_--;
}

void TelemetryBuffer::DropAt(size_t index, std::vector<uint64_t>* settled) {
  Entry& e = entries_[index];
  if (e.tag != 0) settled->push_back(e.tag);
  stats_.dropped_batches++;
  stats_.dropped_summaries += e.batch.iterations_size();
  stats_.dropped_ops += common::OpRecordCount(e.batch);
  dropped_records_pending_ += e.batch.iterations_size() + common::OpRecordCount(e.batch);
  bytes_ -= e.bytes;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
  if (index < cursor_) cursor_--;
}

void TelemetryBuffer::MakeRoom(size_t incoming_bytes, std::vector<uint64_t>* settled) {
  while (!entries_.empty() && (entries_.size() + 1 > options_.max_batches ||
                               bytes_ + incoming_bytes > options_.max_bytes)) {
    // Unnumbered entries were never sent, so dropping one from the middle leaves no hole in the
    // sequence. Raw-op batches go first: summaries are what the controller always needs.
    size_t victim = 0;
    for (size_t i = cursor_; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (!e.numbered && e.batch.iterations_size() == 0 && common::OpRecordCount(e.batch) > 0) {
        victim = i;
        break;
      }
    }
    DropAt(victim, settled);
  }
}

void TelemetryBuffer::Push(v1::TelemetryBatch batch, uint64_t tag) {
  batch.clear_sequence();
  batch.clear_dropped_records();
  const size_t bytes = batch.ByteSizeLong();
  std::vector<uint64_t> settled;
  {
    absl::MutexLock lock(&mu_);
    if (bytes > options_.max_bytes) {
      stats_.dropped_batches++;
      stats_.dropped_summaries += batch.iterations_size();
      stats_.dropped_ops += common::OpRecordCount(batch);
      dropped_records_pending_ += batch.iterations_size() + common::OpRecordCount(batch);
      if (tag != 0) settled.push_back(tag);
    } else {
      MakeRoom(bytes, &settled);
      Entry e;
      e.batch = std::move(batch);
      e.tag = tag;
      e.bytes = bytes;
      bytes_ += bytes;
      entries_.push_back(std::move(e));
    }
    if (!settled.empty()) settling_++;
  }
  Settle(settled);
}

void TelemetryBuffer::PopAcked(uint64_t sequence, std::vector<uint64_t>* settled) {
  while (!entries_.empty() && entries_.front().numbered &&
         entries_.front().batch.sequence() <= sequence) {
    if (entries_.front().tag != 0) settled->push_back(entries_.front().tag);
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
    stats_.acked_batches++;
    if (cursor_ > 0) cursor_--;
  }
}

void TelemetryBuffer::OnConnected(uint64_t controller_acked) {
  std::vector<uint64_t> settled;
  {
    absl::MutexLock lock(&mu_);
    PopAcked(controller_acked, &settled);
    if (next_sequence_ <= controller_acked) next_sequence_ = controller_acked + 1;
    cursor_ = 0;
    if (!settled.empty()) settling_++;
  }
  Settle(settled);
}

std::optional<v1::TelemetryBatch> TelemetryBuffer::NextToSend() {
  absl::MutexLock lock(&mu_);
  if (cursor_ >= entries_.size()) return std::nullopt;
  Entry& e = entries_[cursor_++];
  if (!e.numbered) {
    e.numbered = true;
    e.batch.set_sequence(next_sequence_++);
    e.batch.set_dropped_records(dropped_records_pending_);
    dropped_records_pending_ = 0;
  }
  if (e.ever_sent) {
    stats_.resent_batches++;
  } else {
    stats_.sent_batches++;
    e.ever_sent = true;
  }
  return e.batch;
}

void TelemetryBuffer::Ack(uint64_t sequence) {
  std::vector<uint64_t> settled;
  {
    absl::MutexLock lock(&mu_);
    PopAcked(sequence, &settled);
    if (!settled.empty()) settling_++;
  }
  Settle(settled);
}

uint64_t TelemetryBuffer::FirstUnacked() const {
  absl::MutexLock lock(&mu_);
  if (entries_.empty() || !entries_.front().numbered) return 0;
  return entries_.front().batch.sequence();
}

bool TelemetryBuffer::Empty() const {
  absl::MutexLock lock(&mu_);
  return entries_.empty();
}

bool TelemetryBuffer::HasUnsent() const {
  absl::MutexLock lock(&mu_);
  return cursor_ < entries_.size();
}

bool TelemetryBuffer::WaitUntilEmpty(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto empty = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return entries_.empty() && settling_ == 0;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&empty), timeout);
}

TelemetryBuffer::Stats TelemetryBuffer::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.batches = entries_.size();
  s.bytes = bytes_;
  s.unsent = entries_.size() - cursor_;
  s.next_sequence = next_sequence_;
  return s;
}

}  // namespace falcon::agent
