// Bounded, ordered buffer of telemetry batches waiting for the controller's acknowledgement.
//
// Batches enter unnumbered (Push). A batch gets its sequence number (per agent, strictly
// increasing from 1) the first time it is handed out for sending (NextToSend), so batches
// dropped before they were ever sent leave no hole in the sequence. Numbered batches stay until
// the controller acknowledges them (Ack) and are resent in order on each new connection
// (OnConnected rewinds the send cursor). The controller deduplicates by (agent_id, sequence).
//
// Settlement: a batch pushed with a non-zero `tag` reports that tag to the settle callback once it
// leaves the buffer, acknowledged (the controller stored it) or dropped (counted below); the agent
// tells its shims what was delivered from it (ShimHub::OnSettled).
//
// Bounds: at most `max_batches` batches and `max_bytes` serialized bytes. When a push exceeds
// them, the buffer drops, in this order, the oldest unsent batch that carries only raw op records
// (summaries are kept longest), then the oldest batch of any kind. Dropped batches and the records
// in them are counted; the count of records dropped since the last numbered batch is stamped into
// the next batch's `dropped_records`.
//
// Thread-safe.
#ifndef FALCON_AGENT_TELEMETRY_BUFFER_H_
#define FALCON_AGENT_TELEMETRY_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::agent {

class TelemetryBuffer {
 public:
  struct Options {
    // Batches held at most (sent-but-unacked plus unsent). Default: 4096, about 68 min of
    // summaries at the default 1 s flush interval for one job.
    size_t max_batches = 4096;
    // Serialized bytes held at most. Default: 64 MiB, about 70 min of summaries for 8 ranks at
    // 10 iterations/s with 4 communicators each (~200 bytes per summary).
    size_t max_bytes = size_t{64} << 20;
  };

  struct Stats {
    size_t batches = 0;              // Held now.
    size_t bytes = 0;                // Serialized bytes held now.
    size_t unsent = 0;               // Held and not yet sent on the current connection.
    uint64_t next_sequence = 1;      // Sequence the next numbered batch gets.
    uint64_t dropped_batches = 0;    // Dropped for space since creation.
    uint64_t dropped_summaries = 0;  // Iteration summaries inside dropped batches.
    uint64_t dropped_ops = 0;        // Raw op records inside dropped batches.
    uint64_t sent_batches = 0;       // First sends.
    uint64_t resent_batches = 0;     // Sends after the first (after a reconnect).
    uint64_t acked_batches = 0;      // Removed by acknowledgement.
  };

  // kInvalidArgument naming the option when a bound is 0.
  static absl::Status Validate(const Options& options);

  // REQUIRES: Validate(options).ok().
  explicit TelemetryBuffer(Options options);

  // Called with the tags of batches that left the buffer (acknowledged or dropped), outside the
  // buffer's lock, on the thread that removed them. Set before the buffer is used.
  using SettledFn = std::function<void(const std::vector<uint64_t>& tags)>;
  void set_on_settled(SettledFn fn) { on_settled_ = std::move(fn); }

  // Appends `batch` (its `sequence` is ignored and assigned later), dropping older batches when
  // the bounds are exceeded. A single batch larger than max_bytes is dropped itself. `tag`
  // (0: none) is reported when the batch settles.
  void Push(v1::TelemetryBatch batch, uint64_t tag = 0) ABSL_LOCKS_EXCLUDED(mu_);

  // A new controller connection began and the controller already holds every batch up to
  // `controller_acked` (ControllerHello.acked_sequence): drops those, makes sure new numbers
  // exceed it, and rewinds the send cursor so every remaining batch is sent again in order.
  void OnConnected(uint64_t controller_acked) ABSL_LOCKS_EXCLUDED(mu_);

  // The next batch to write on the current connection, numbered; nullopt when all are sent.
  std::optional<v1::TelemetryBatch> NextToSend() ABSL_LOCKS_EXCLUDED(mu_);

  // The controller stored every batch up to and including `sequence`: removes them.
  void Ack(uint64_t sequence) ABSL_LOCKS_EXCLUDED(mu_);

  // Lowest numbered batch still held (AgentHello.first_unacked_sequence); 0 when none.
  uint64_t FirstUnacked() const ABSL_LOCKS_EXCLUDED(mu_);

  // True when nothing is held (everything pushed so far is acknowledged or dropped).
  bool Empty() const ABSL_LOCKS_EXCLUDED(mu_);
  bool HasUnsent() const ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until Empty() and the settle callbacks of every removed batch have returned, or
  // `timeout` passes (real time); returns whether both held.
  bool WaitUntilEmpty(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const Options& options() const { return options_; }

 private:
  struct Entry {
    v1::TelemetryBatch batch;
    uint64_t tag = 0;
    size_t bytes = 0;
    bool numbered = false;  // batch.sequence is valid.
    bool ever_sent = false;
  };

  // Removals append the tags of the batches removed to `settled`.
  void DropAt(size_t index, std::vector<uint64_t>* settled) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MakeRoom(size_t incoming_bytes, std::vector<uint64_t>* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PopAcked(uint64_t sequence, std::vector<uint64_t>* settled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports `settled` to the callback; a caller that collected a non-empty `settled` counted it
  // in settling_ under the lock.
  void Settle(const std::vector<uint64_t>& settled) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  SettledFn on_settled_;
  mutable absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);  // Numbered entries precede unnumbered ones.
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t cursor_ ABSL_GUARDED_BY(mu_) = 0;  // Index of the next entry to send.
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t dropped_records_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int settling_ ABSL_GUARDED_BY(mu_) = 0;  // Settle calls in flight (WaitUntilEmpty waits).
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::agent

#endif  // FALCON_AGENT_TELEMETRY_BUFFER_H_
