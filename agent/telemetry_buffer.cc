#include "agent/telemetry_buffer.h"

#include <utility>

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

void TelemetryBuffer::DropAt(size_t index) {
  Entry& e = entries_[index];
  stats_.dropped_batches++;
  stats_.dropped_summaries += e.batch.iterations_size();
  stats_.dropped_ops += e.batch.ops_size();
  dropped_records_pending_ += e.batch.iterations_size() + e.batch.ops_size();
  bytes_ -= e.bytes;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
  if (index < cursor_) cursor_--;
}

void TelemetryBuffer::MakeRoom(size_t incoming_bytes) {
  while (!entries_.empty() && (entries_.size() + 1 > options_.max_batches ||
                               bytes_ + incoming_bytes > options_.max_bytes)) {
    // Unnumbered entries were never sent, so dropping one from the middle leaves no hole in the
    // sequence. Raw-op batches go first: summaries are what the controller always needs.
    size_t victim = 0;
    for (size_t i = cursor_; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (!e.numbered && e.batch.iterations_size() == 0 && e.batch.ops_size() > 0) {
        victim = i;
        break;
      }
    }
    DropAt(victim);
  }
}

void TelemetryBuffer::Push(v1::TelemetryBatch batch) {
  batch.clear_sequence();
  batch.clear_dropped_records();
  const size_t bytes = batch.ByteSizeLong();
  absl::MutexLock lock(&mu_);
  if (bytes > options_.max_bytes) {
    stats_.dropped_batches++;
    stats_.dropped_summaries += batch.iterations_size();
    stats_.dropped_ops += batch.ops_size();
    dropped_records_pending_ += batch.iterations_size() + batch.ops_size();
    return;
  }
  MakeRoom(bytes);
  Entry e;
  e.batch = std::move(batch);
  e.bytes = bytes;
  bytes_ += bytes;
  entries_.push_back(std::move(e));
}

void TelemetryBuffer::OnConnected(uint64_t controller_acked) {
  absl::MutexLock lock(&mu_);
  while (!entries_.empty() && entries_.front().numbered &&
         entries_.front().batch.sequence() <= controller_acked) {
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
    stats_.acked_batches++;
  }
  if (next_sequence_ <= controller_acked) next_sequence_ = controller_acked + 1;
  cursor_ = 0;
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
  absl::MutexLock lock(&mu_);
  while (!entries_.empty() && entries_.front().numbered &&
         entries_.front().batch.sequence() <= sequence) {
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
    stats_.acked_batches++;
    if (cursor_ > 0) cursor_--;
  }
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
  auto empty = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entries_.empty(); };
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
